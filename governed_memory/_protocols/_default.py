"""The configured policy's gate: what governs a Conversation built without ``governance=``.

``Conversation``, ``Agent`` and ``ContextCompressor`` live in the memory
layer, below the composition root that builds a ``Governance`` from
settings, and may not import it (not even inside a function). So the root
package (``governed_memory/__init__.py``, above every layer, imported before
any of its sub-packages) installs a :class:`GovernanceProvider` here, and the
memory layer asks it through :func:`resolve_governance`:

* ``governance`` not given (:data:`CONFIGURED`, the default): the gate of the
  configured policy, shared by every caller of the process, or None when no
  policy is configured (the reference's default mode, byte for byte);
* ``governance=None`` given: refused when a policy other than the built-in
  default is configured (a caller cannot opt out of the admin's policy);
  otherwise default mode;
* a gate given: that gate.

Whether a policy is configured is a look at the names of the environment
(no pydantic, no file read), once per Conversation, never per ``add``.
"""

from __future__ import annotations

import enum
from typing import Final, Literal, Protocol

from ._gate import ConsentGate
from ._storage import AgentStore

__all__ = [
    "CONFIGURED",
    "Configured",
    "GovernanceProvider",
    "default_governance",
    "install_governance_provider",
    "policy_configured",
    "resolve_governance",
]


class _Configured(enum.Enum):
    CONFIGURED = "configured"

    def __repr__(self) -> str:
        return "CONFIGURED"


CONFIGURED: Final = _Configured.CONFIGURED
"""The default of ``governance=``: the configured policy's gate, or default mode when none is configured."""

Configured = Literal[_Configured.CONFIGURED]
"""The type of :data:`CONFIGURED`, for signatures."""


class GovernanceProvider(Protocol):
    """Builds and shares the gate of the policy the settings configure (the root package installs one)."""

    def configured(self) -> bool:
        """Whether the settings name a policy; cheap (names of the environment only)."""
        ...

    def governance(self) -> ConsentGate[AgentStore]:
        """The configured policy's gate: one per workspace and policy, shared, thread-safe.

        Called only when :meth:`configured` is True.
        """
        ...

    def refuse_ungoverned(self, what: str) -> None:
        """Raise ``ConfigurationError`` naming the policy and the fix if it is not the default one.

        Called only when :meth:`configured` is True, for ``what`` (e.g.
        ``"Conversation(name='x', governance=None)"``) asking to run ungoverned.
        """
        ...


_provider: GovernanceProvider | None = None


def install_governance_provider(provider: GovernanceProvider | None) -> GovernanceProvider | None:
    """Install ``provider`` (None: none, every default Conversation runs in default mode); return the previous one."""
    global _provider
    previous, _provider = _provider, provider
    return previous


def policy_configured() -> bool:
    """Whether the settings name a policy (False without a provider)."""
    provider = _provider
    return provider is not None and provider.configured()


def default_governance() -> ConsentGate[AgentStore] | None:
    """The configured policy's shared gate, or None when no policy is configured."""
    provider = _provider
    if provider is None or not provider.configured():
        return None
    return provider.governance()


def resolve_governance(
    given: ConsentGate[AgentStore] | Configured | None, *, what: str
) -> ConsentGate[AgentStore] | None:
    """The gate a Conversation, Agent or ContextCompressor runs under (see the module docstring).

    Raises:
        ConfigurationError: ``given`` is None while a non-default policy is
            configured; the message names the policy and the fix.
    """
    if given is CONFIGURED:
        return default_governance()
    if given is None:
        provider = _provider
        if provider is not None and provider.configured():
            provider.refuse_ungoverned(what)
        return None
    return given
