"""Who is signed in to the console: a :class:`Principal` with one :class:`Role`.

The roles (docs/console-auth.md):

* ``privacy-officer``: requests, subject actions and the audited view of content;
* ``administrator``: retention, holds, health and audit; never content;
* ``auditor``: read-only: requests (no content), audit, retention and health.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["Principal", "Role"]


class Role(StrEnum):
    """A console role; its value is what accounts files and ``role_map`` name."""

    PRIVACY_OFFICER = "privacy-officer"
    ADMINISTRATOR = "administrator"
    AUDITOR = "auditor"


@dataclass(frozen=True)
class Principal:
    """An authenticated console user.

    Args:
        name: the login name, or the OIDC ``preferred_username`` (else ``email``, else ``sub``).
        role: the one role the user acts in.
        source: ``"local"`` for an accounts-file user, ``"oidc:<issuer>"`` for an OIDC one.
    """

    name: str
    role: Role
    source: str

    @property
    def actor(self) -> str:
        """What the audit log records as the actor: ``console:<name>`` or ``oidc:<name>``."""
        prefix = "console" if self.source == "local" else "oidc"
        return f"{prefix}:{self.name}"
