"""A ``Session`` of the OpenAI Agents SDK over governed memory.

``pip install 'governed-memory[openai-agents]'``; docs/integrations.md is the
guide. The change to an SDK program is one line::

    session = GovernedSession("conversation-123", subject_id="customer-42")
    result = await Runner.run(agent, "Hello", session=session)

Modules, one concept each:

* ``_items``    an item as a MEMORY.md record (one JSON object per record; pure)
* ``_memory``   the blocking half: the gate, the store, pop and clear, holds, audit
* ``_tracing``  the SDK's tracing under a policy (refused unless allowed)
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar, cast

from agents.memory import SessionABC
from agents.memory.session_settings import (
    SessionSettings,
    coerce_session_settings,
    resolve_session_limit,
)

from ..._base import Clock
from ..._errors import ConfigurationError
from ..._protocols import CONFIGURED, Configured, resolve_governance
from ..._wiring import Governance
from ._memory import SessionMemory
from ._tracing import check_tracing, rules_as_default

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

__all__ = ["GovernedSession"]

_T = TypeVar("_T")


async def _settled(task: asyncio.Future[_T]) -> _T:
    """``task``'s outcome, awaited to its end even when the caller is cancelled meanwhile.

    A worker thread cannot be stopped mid-write: a cancelled ``add_items``
    still writes. As the SDK's own sessions do (0.24, ``_await_mutation``),
    the CancelledError reaches the caller only once the write is done, so
    the caller never carries on while its mutation is still landing.
    """
    cancelled: asyncio.CancelledError | None = None
    while not task.done():
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError as exc:
            cancelled = cancelled or exc
    try:
        result = task.result()  # retrieved even when cancelled: no "never retrieved" warning
    except BaseException:
        if cancelled is not None:
            raise cancelled from None
        raise
    if cancelled is not None:
        raise cancelled from None
    return result


class GovernedSession(SessionABC):
    """An OpenAI Agents SDK session whose items live in governed memory.

    Each item is one record of the memory of the agent ``session_id``
    (``<workspace>/agents/<session_id>/``), written and read through the
    policy's gate: consent, encryption at rest, subject isolation, audit,
    erasure, retention. ``get_items``, ``add_items``, ``pop_item`` and
    ``clear_session`` mean what they mean in the SDK; the blocking work runs
    in a worker thread, one operation of a session at a time, and the
    agent's file lock orders writers across sessions and processes.

    Args:
        session_id: the SDK's session id; it names the session's agent folder
            and must be a valid agent name (no path separators, ``..``,
            control characters; at most 255 bytes).
        subject_id: the data subject whose conversation this is: consent is
            looked up for them, the items are theirs in exports and erasures,
            and the session returns their items only. None: subject-free
            items (under a policy that requires consent, nothing is persisted).
        governance: the policy layer (a :class:`governed_memory.Governance`).
            Not given: the configured policy's (``GOVERNED_MEMORY_POLICY``),
            or default mode when none is configured. None: default mode,
            refused while a non-default policy is configured.
        session_settings: the SDK's settings (``limit``: the default of
            :meth:`get_items`).
        allow_sdk_tracing: let session operations run inside an SDK trace
            under a non-default policy (see docs/integrations.md); only when
            your trace processors keep spans where the policy allows.
        clock: time of the records (default: the governance's clock).

    Raises:
        InvalidAgentNameError: ``session_id`` cannot name a folder.
        ConfigurationError: ``governance=None`` under a configured
            non-default policy; a ``subject_id`` that is not a valid id, or
            that the ``session_id`` contains under a non-default policy (the
            id is a folder name in clear); a gate that is not a ``Governance``.
    """

    def __init__(
        self,
        session_id: str,
        *,
        subject_id: str | None = None,
        governance: Governance | Configured | None = CONFIGURED,
        session_settings: SessionSettings | dict[str, Any] | None = None,
        allow_sdk_tracing: bool = False,
        clock: Clock | None = None,
    ) -> None:
        gate = resolve_governance(
            governance, what=f"GovernedSession({session_id!r}, governance=None)"
        )
        if gate is not None and not isinstance(gate, Governance):
            raise ConfigurationError(
                f"GovernedSession({session_id!r}) got governance={gate!r}, which is not a "
                "governed_memory.Governance (holds, audit and erasure need one); pass "
                "governed_memory.Governance(...) or leave governance= out"
            )
        if (
            gate is not None
            and subject_id is not None
            and isinstance(session_id, str)
            and subject_id in session_id
            and not rules_as_default(gate.policy)
        ):
            # Neither id is repeated here: the message would carry the subject id too.
            raise ConfigurationError(
                "GovernedSession(...): the session_id contains the subject_id, and the session "
                "id names its folder (agents/<session_id>/) in clear on disk, while policy "
                f"{gate.policy.id!r} v{gate.policy.version} keeps subject ids out of the "
                "workspace (their memories are in folders named by a hash or keyed reference); "
                "use a conversation id that does not contain the subject id, e.g. "
                "uuid.uuid4().hex, and keep the subject in subject_id="
            )
        self._memory = SessionMemory(
            session_id, subject_id=subject_id, governance=gate, clock=clock
        )
        self.session_id = session_id
        self.subject_id = self._memory.subject_id
        self.governance: Governance | None = gate
        self.session_settings = (
            coerce_session_settings(session_settings) if session_settings is not None else None
        )
        self.allow_sdk_tracing = allow_sdk_tracing
        self._lock = threading.Lock()  # one operation of this session at a time

    async def _run(self, operation: str, work: Callable[[], _T], *, mutation: bool = True) -> _T:
        if self.governance is not None and not self.allow_sdk_tracing:
            check_tracing(self.governance.policy, session_id=self.session_id, operation=operation)

        def locked() -> _T:
            with self._lock:
                return work()

        # The store is blocking (file locks, fsync): off the event loop, so a
        # Runner serving other sessions is not stalled.
        if not mutation:
            return await asyncio.to_thread(locked)
        return await _settled(asyncio.ensure_future(asyncio.to_thread(locked)))

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items, oldest first; with ``limit``, the newest ``limit`` of them.

        ``limit`` None uses ``session_settings.limit`` (None: all). Items
        whose subject has no ``persist`` consent are not read back.
        """
        resolved = resolve_session_limit(limit, self.session_settings)
        items = await self._run("get_items", lambda: self._memory.items(resolved), mutation=False)
        return cast("list[TResponseInputItem]", items)

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append ``items`` in one write through the persist gate (all of them or none reach disk).

        Raises:
            ConfigurationError: an item is not a JSON object (nothing is written).
            ConsentRequiredError: consent is missing under ``on_missing = "deny"``.
        """
        batch = list(items)
        await self._run("add_items", lambda: self._memory.add(batch))

    async def pop_item(self) -> TResponseInputItem | None:
        """Remove and return the newest item (None when the session is empty).

        Raises:
            ErasureBlockedError: a legal hold covers the session or its subject.
        """
        item = await self._run("pop_item", self._memory.pop)
        return cast("TResponseInputItem | None", item)

    async def clear_session(self) -> None:
        """Remove every item of the session (its subject's records).

        Raises:
            ErasureBlockedError: a legal hold covers the session or its subject.
        """
        await self._run("clear_session", self._memory.clear)

    def close(self) -> None:
        """Release the open store (the session reopens it when used again)."""
        with self._lock:
            self._memory.close()

    def __repr__(self) -> str:
        policy = self.governance.policy.id if self.governance is not None else "none"
        return f"GovernedSession(session_id={self.session_id!r}, policy={policy!r})"
