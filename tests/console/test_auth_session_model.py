"""The session store against a model: any sequence of sign-ins, requests, waits and revocations.

Hypothesis drives :class:`SessionStore` and a plain dictionary model side by
side; after every step both agree on which ids still open a session. The
model states the rules of docs/console-auth.md: a session lives while it is
used within ``idle`` seconds, never past ``absolute`` seconds after sign-in,
and never after its revocation or its user's.
"""

from __future__ import annotations

from auth_app import FakeClock
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, invariant, rule

from governed_memory.console._auth._sessions import SessionStore
from governed_memory.console._principal import Principal, Role

IDLE, ABSOLUTE = 60.0, 300.0
NAMES = st.sampled_from(["alice", "bob", "carol"])


class SessionRules(RuleBasedStateMachine):
    ids = Bundle("ids")

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self.store = SessionStore(idle=IDLE, absolute=ABSOLUTE, now=self.clock)
        # id -> (name, created, last_seen); dead ids are removed.
        self.model: dict[str, tuple[str, float, float]] = {}

    def _alive(self, session_id: str) -> bool:
        entry = self.model.get(session_id)
        if entry is None:
            return False
        _, created, seen = entry
        now = self.clock.t
        if now - seen > IDLE or now - created > ABSOLUTE:
            del self.model[session_id]
            return False
        return True

    @rule(target=ids, name=NAMES)
    def sign_in(self, name: str) -> str:
        session_id, _ = self.store.create(Principal(name, Role.AUDITOR, "local"))
        self.model[session_id] = (name, self.clock.t, self.clock.t)
        return session_id

    @rule(session_id=ids)
    def request(self, session_id: str) -> None:
        expected = self._alive(session_id)
        found = self.store.get(session_id)
        assert (found is not None) == expected
        if expected:
            name, created, _ = self.model[session_id]
            assert found is not None and found.principal.name == name
            self.model[session_id] = (name, created, self.clock.t)

    # The edges of the windows, where an off-by-one would hide, and anything between.
    @rule(
        seconds=st.sampled_from([IDLE - 1, IDLE, IDLE + 1, IDLE + 5, ABSOLUTE / 2])
        | st.integers(min_value=0, max_value=2 * int(IDLE))
    )
    def wait(self, seconds: float) -> None:
        self.clock.advance(seconds)

    @rule(
        session_id=ids,
        pauses=st.lists(st.integers(min_value=1, max_value=int(IDLE) - 1), max_size=15),
    )
    def keep_busy(self, session_id: str, pauses: list[int]) -> None:
        """A user working steadily, each request inside the idle window, towards the absolute one."""
        for pause in pauses:
            self.clock.advance(pause)
            self.request(session_id)

    @rule(session_id=ids)
    def sign_out(self, session_id: str) -> None:
        alive = self._alive(session_id)
        who = self.store.revoke(session_id)
        if alive:
            assert who is not None
        self.model.pop(session_id, None)

    @rule(name=NAMES)
    def account_changed(self, name: str) -> None:
        self.store.revoke_user(name, "local")
        for session_id in [k for k, v in self.model.items() if v[0] == name]:
            del self.model[session_id]

    @rule(forged=st.text(min_size=0, max_size=60))
    def forged_cookie(self, forged: str) -> None:
        if forged not in self.model:
            assert self.store.get(forged) is None

    @invariant()
    def same_count(self) -> None:
        alive = [k for k in list(self.model) if self._alive(k)]
        assert len(self.store) == len(alive)


SessionRules.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
test_the_store_follows_the_session_rules = SessionRules.TestCase
