"""Server-side console sessions: a random 256-bit id in the ``gm_session`` cookie.

The cookie carries only the id (``secrets.token_urlsafe(32)``); everything
else (who, since when, the CSRF secret, the forms issued) stays in this
process's memory, keyed by the id's SHA-256, so a forged or altered cookie
simply finds no session. A session ends when it has been idle for
``session_idle``, ``session_max`` after sign-in however busy, at logout, and
when its account changes (see :class:`SessionStore.revoke_user`). Sessions
are not persisted: a restart of the console ends all of them (everyone signs
in again), which docs/console-auth.md states.

Time comes from ``now`` (default :func:`time.monotonic`: a wall-clock change
or a daylight-saving jump neither ends nor extends a session).
"""

from __future__ import annotations

import hashlib
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field

from .._principal import Principal

__all__ = ["COOKIE", "Session", "SessionStore"]

COOKIE = "gm_session"
_ID = re.compile(r"^[A-Za-z0-9_-]{43}$")
# A signed-in user rarely has more open forms than this; the oldest are forgotten first.
MAX_FORMS = 256


def _key(session_id: str) -> bytes:
    return hashlib.sha256(session_id.encode("ascii")).digest()


@dataclass
class Session:
    """One signed-in session (mutable: ``last_seen`` and the issued forms change)."""

    principal: Principal
    created: float
    last_seen: float
    csrf_token: str
    # What the session was authenticated against (a local account), to notice changes.
    credential: object = None
    forms: OrderedDict[bytes, None] = field(default_factory=OrderedDict)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def issue_form(self) -> str:
        """A fresh one-time ``form_nonce`` for one rendered form."""
        nonce = secrets.token_urlsafe(32)
        with self.lock:
            self.forms[hashlib.sha256(nonce.encode()).digest()] = None
            while len(self.forms) > MAX_FORMS:
                self.forms.popitem(last=False)
        return nonce

    def use_form(self, nonce: str) -> bool:
        """Spend ``nonce``: True the first time for a nonce this session issued, else False."""
        digest = hashlib.sha256(nonce.encode("utf-8", "surrogatepass")).digest()
        with self.lock:
            return self.forms.pop(digest, False) is None


class SessionStore:
    """The live sessions of this console process.

    Args:
        idle: seconds without a request after which a session ends.
        absolute: seconds after sign-in after which a session ends.
        now: the clock, in seconds (monotonic by default).
    """

    def __init__(
        self, *, idle: float, absolute: float, now: Callable[[], float] = time.monotonic
    ) -> None:
        self.idle = idle
        self.absolute = absolute
        self._now = now
        self._lock = threading.Lock()
        self._sessions: dict[bytes, Session] = {}

    def create(self, principal: Principal, *, credential: object = None) -> tuple[str, Session]:
        """Start a session for ``principal``; returns the id for the cookie and the session."""
        session_id = secrets.token_urlsafe(32)
        at = self._now()
        session = Session(
            principal=principal,
            created=at,
            last_seen=at,
            csrf_token=secrets.token_urlsafe(32),
            credential=credential,
        )
        with self._lock:
            self._expire(at)
            self._sessions[_key(session_id)] = session
        return session_id, session

    def get(self, session_id: str | None) -> Session | None:
        """The live session of ``session_id`` (and mark it used), else None."""
        if not session_id or not _ID.match(session_id):
            return None
        at = self._now()
        key = _key(session_id)
        with self._lock:
            session = self._sessions.get(key)
            if session is None:
                return None
            if at - session.last_seen > self.idle or at - session.created > self.absolute:
                del self._sessions[key]
                return None
            session.last_seen = at
            return session

    def revoke(self, session_id: str | None) -> Principal | None:
        """End the session of ``session_id``; returns whose it was (None: there was none)."""
        if not session_id or not _ID.match(session_id):
            return None
        with self._lock:
            session = self._sessions.pop(_key(session_id), None)
        return session.principal if session else None

    def revoke_user(self, name: str, source: str) -> int:
        """End every session of one user (a role change, a removed account); returns how many."""
        with self._lock:
            doomed = [
                k
                for k, s in self._sessions.items()
                if s.principal.name == name and s.principal.source == source
            ]
            for key in doomed:
                del self._sessions[key]
        return len(doomed)

    def __len__(self) -> int:
        with self._lock:
            self._expire(self._now())
            return len(self._sessions)

    def _expire(self, at: float) -> None:
        dead = [
            k
            for k, s in self._sessions.items()
            if at - s.last_seen > self.idle or at - s.created > self.absolute
        ]
        for key in dead:
            del self._sessions[key]
