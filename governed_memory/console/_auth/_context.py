"""The access-control collaborators of one console app, built once by ``install``.

:class:`AuthContext` holds the session store, the login rate limiter, the
local accounts, the OIDC client, the pending OIDC sign-ins and the secret key,
and writes the sign-in audit entries. It lives on ``app.state.console_auth``.
"""

from __future__ import annotations

import os
import secrets
import stat
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import governed_memory as gm

from ._accounts import Accounts
from ._oidc import OidcLogin
from ._ratelimit import SlidingWindowLimiter
from ._sessions import SessionStore

if TYPE_CHECKING:
    from starlette.requests import Request

    from .._config import ConsoleConfig

__all__ = ["AuthContext", "PendingLogins", "read_secret_key"]

MIN_SECRET_BYTES = 32


def read_secret_key(path: Path | None) -> bytes:
    """The key of the sign-in form tokens: the file's bytes, else random for this process.

    Raises:
        ConfigurationError: the file is readable by others, missing or too short.
    """
    if path is None:
        return secrets.token_bytes(32)
    try:
        st = os.stat(path)
        data = Path(path).read_bytes().strip()
    except OSError as exc:
        raise gm.ConfigurationError(
            f"console secret_key_file {path} cannot be read ({exc.strerror}); create it with "
            f"`head -c 32 /dev/urandom | base64 > {path} && chmod 600 {path}`"
        ) from exc
    if stat.S_IMODE(st.st_mode) & 0o077:
        raise gm.ConfigurationError(
            f"console secret_key_file {path} has mode {stat.S_IMODE(st.st_mode):04o}; it must be "
            f"0600: run `chmod 600 {path}`"
        )
    if len(data) < MIN_SECRET_BYTES:
        raise gm.ConfigurationError(
            f"console secret_key_file {path} holds {len(data)} bytes; it needs at least "
            f"{MIN_SECRET_BYTES} random bytes: `head -c 32 /dev/urandom | base64 > {path}`"
        )
    return data


class PendingLogins:
    """OIDC sign-ins under way: the flow's state, nonce and code verifier, by a cookie id.

    authlib keeps them in ``request.session``; here that is a server-side dict
    per flow (the ``gm_oidc`` cookie names it), used once and gone after
    ``ttl`` seconds, at most ``max_flows`` at a time.
    """

    COOKIE = "gm_oidc"

    def __init__(
        self,
        *,
        ttl: float = 600,
        max_flows: int = 10_000,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self._ttl = ttl
        self._max = max_flows
        self._now = now
        self._lock = threading.Lock()
        self._flows: OrderedDict[str, tuple[float, dict[str, Any]]] = OrderedDict()

    def start(self) -> tuple[str, dict[str, Any]]:
        """A new flow: its cookie value and the dict authlib fills."""
        flow_id = secrets.token_urlsafe(32)
        data: dict[str, Any] = {}
        with self._lock:
            self._flows[flow_id] = (self._now(), data)
            while len(self._flows) > self._max:
                self._flows.popitem(last=False)
        return flow_id, data

    def take(self, flow_id: str | None) -> dict[str, Any] | None:
        """The flow's dict, removed (a callback is accepted once), or None."""
        if not flow_id:
            return None
        with self._lock:
            entry = self._flows.pop(flow_id, None)
        if entry is None or self._now() - entry[0] > self._ttl:
            return None
        return entry[1]


@dataclass
class AuthContext:
    """Everything the auth routes and the middleware share."""

    config: ConsoleConfig
    sessions: SessionStore
    limiter: SlidingWindowLimiter
    accounts: Accounts | None
    oidc: OidcLogin | None
    secret: bytes
    pending: PendingLogins = field(default_factory=PendingLogins)

    @classmethod
    def from_config(
        cls, config: ConsoleConfig, *, now: Callable[[], float] = time.monotonic
    ) -> AuthContext:
        """Build the collaborators (reads the secret key file; writes nothing)."""
        return cls(
            config=config,
            sessions=SessionStore(
                idle=config.session_idle.total_seconds(),
                absolute=config.session_max.total_seconds(),
                now=now,
            ),
            limiter=SlidingWindowLimiter(
                attempts=config.login_rate.attempts,
                window=config.login_rate.window.total_seconds(),
                now=now,
            ),
            accounts=(
                Accounts(config.accounts_file, config.password_hashing)
                if config.accounts_file
                else None
            ),
            oidc=OidcLogin(config.oidc, config.role_map) if config.oidc else None,
            secret=read_secret_key(config.secret_key_file),
            pending=PendingLogins(now=now),
        )

    @staticmethod
    def audit(request: Request, operation: str, outcome: str, actor: str, **attrs: Any) -> None:
        """Write one sign-in entry through the governance's audit sink (``app.state.governance``).

        ``actor`` is recorded as a keyed hash, like every actor of the log.
        """
        governance = getattr(request.app.state, "governance", None)
        if governance is None:
            raise gm.ConfigurationError(
                "the console app has no governance to audit sign-ins through; create_app must "
                "set app.state.governance"
            )
        governance.audit.record(
            operation, agent=None, subject_id=None, outcome=outcome, actor=actor, **attrs
        )
