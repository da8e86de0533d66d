"""The blocking half of a GovernedSession: one session's items in governed memory.

A session is an agent of the workspace named by its session id
(``<workspace>/agents/<session_id>/``); each item is one record of its memory
(:mod:`._items`), attributed to the session's subject. Every read goes
through the preload gate, every write through the persist gate; pop and
clear rewrite the memory atomically under the agent's lock, refuse while a
legal hold covers the session, and are audited (``session.pop``,
``session.clear``: counts and sizes, never content). Items the gate keeps
off disk (``memory_only``) stay in this object, in their place, as a
governed Conversation keeps such messages in its history.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any, NamedTuple

from ..._base import Clock, SystemClock, memory_md_path, resolve_workspace
from ..._errors import ConfigurationError, InvalidAgentNameError
from ..._format import MemoryFile, Record, parse_memory, render_header
from ..._protocols import ErasureWatch, resolve_governance
from ..._records import HoldRegistry, validate_subject_id
from ..._stores import (
    ENCRYPTED_MEMORY,
    SUBJECTS_DIR,
    AgentStore,
    PlaintextAgentStore,
    isolate_subjects,
)
from ..._subjects import ErasureBlockedError, subject_context
from ..._wiring import Governance
from ._items import decode_item, render_items

__all__ = ["SessionMemory"]

logger = logging.getLogger("governed_memory")

Item = dict[str, Any]


class _Stored(NamedTuple):
    parsed: MemoryFile | None
    items: list[tuple[int, int, Item]]
    """(index in the memory's records, position among the subject's records, item), readable ones."""
    records: int
    """How many records of the subject the memory holds, readable or not."""


def _session_path(session_id: object, workspace: Path | None) -> Path:
    if not isinstance(session_id, str):
        raise InvalidAgentNameError(
            f"session_id {session_id!r} is a {type(session_id).__name__}; pass a string such "
            "as 'conversation-123' (it names the session's folder under <workspace>/agents/)"
        )
    try:
        return memory_md_path(session_id, workspace)
    except InvalidAgentNameError as exc:
        raise InvalidAgentNameError(
            f"session_id {session_id!r} cannot name the session's folder under "
            f"<workspace>/agents/: {exc}"
        ) from exc


class SessionMemory:
    """One session's items in governed memory; blocking, for one thread at a time.

    Args:
        session_id: the session, validated as an agent name (never a path).
        subject_id: whose items these are (None: subject-free items).
        governance: the gate (None: default mode, the plaintext store).
        clock: time of the records (default: the governance's, else the system clock).
    """

    def __init__(
        self,
        session_id: str,
        *,
        subject_id: str | None,
        governance: Governance | None,
        clock: Clock | None = None,
    ) -> None:
        workspace = governance.workspace if governance is not None else resolve_workspace(None)
        self._path = _session_path(session_id, workspace)
        self.agent = session_id
        self.subject_id = None if subject_id is None else validate_subject_id(subject_id)
        self.governance = governance
        self._workspace = workspace
        self._clock: Clock = clock or (governance.clock if governance else SystemClock())
        self._store: AgentStore | None = None
        self._watch: ErasureWatch | None = None
        self._holds: HoldRegistry | None = None
        # Items kept off disk by the gate: (how many of the subject's records came before, item).
        self._unsaved: list[tuple[int, Item]] = []
        self._warned_foreign = False

    # -- opening -------------------------------------------------------

    def _header(self) -> str:
        return render_header(self.agent, self._clock.now().isoformat())

    def _open(self) -> AgentStore:
        """The store of the session's items, opened on first use (opening writes nothing)."""
        if self._store is not None:
            self._drop_erased()
            return self._store
        gov = self.governance
        if gov is None:
            # Default mode writes the workspace's files: refused (one line, naming the fix)
            # when the settings configure a policy or a database, whose storage it would miss.
            resolve_governance(None, what=f"session {self.agent!r} without governance")
            folder = self._path.parent
            governed = [n for n in (ENCRYPTED_MEMORY, SUBJECTS_DIR) if (folder / n).exists()]
            if governed:
                # Memory only its policy can read (encrypted, or kept per subject):
                # default mode would miss it and write plaintext beside it.
                raise ConfigurationError(
                    f"session {self.agent!r} holds governed memory ({', '.join(governed)}) and "
                    "this GovernedSession has no governance, so it could not read it and would "
                    "write plaintext beside it; configure the policy that wrote it "
                    "(GOVERNED_MEMORY_POLICY, and GOVERNED_MEMORY_MASTER_KEY when it encrypts) "
                    "or pass governance=governed_memory.Governance(...)"
                )
            store: AgentStore = PlaintextAgentStore(self._path, self._header, clock=self._clock)
        else:
            store = gov.store_factory(self._path, self._header)
            # Interrupted erasures of this session complete before anything is read.
            self._watch = gov.erasure_watch(self.agent)
            if self._watch is not None:
                self._watch.on_open()
            if gov.isolates_subjects:
                # As a governed Conversation does: records written before the
                # policy isolated subjects move to their subjects' memories first.
                if store.stat() is not None:  # nothing to move in a new session (no folder made)
                    isolate_subjects(store)
                if self.subject_id is not None:
                    store = store.subject_store(self.subject_id)
        self._store = store
        return store

    def _drop_erased(self) -> None:
        """Forget kept-off-disk items whose subject (or session) an erasure covered since."""
        if self._watch is None:
            return
        erased = self._watch.new_erasures()
        if erased.whole_agent or (
            self.subject_id is not None and self.subject_id in erased.subjects
        ):
            self._unsaved.clear()

    # -- reading -------------------------------------------------------

    def _stored(self, store: AgentStore) -> _Stored:
        """The memory as parsed, the session's readable items and how many records it has."""
        text = store.read_memory()
        if text is None:
            return _Stored(None, [], 0)
        parsed = parse_memory(text)
        mine = [r for r in parsed.records if r.subject_id == self.subject_id]
        if mine and self.governance is not None:
            readable = {id(r) for r in self.governance.preload_records(mine, agent=self.agent)}
        else:
            readable = {id(r) for r in mine}
        items: list[tuple[int, int, Item]] = []
        position, foreign = 0, 0
        for index, record in enumerate(parsed.records):
            if record.subject_id != self.subject_id:
                continue
            if id(record) in readable:
                item = decode_item(record)
                if item is None:
                    foreign += 1
                else:
                    items.append((index, position, item))
            position += 1
        if foreign and not self._warned_foreign:
            self._warned_foreign = True
            logger.warning(
                "governed_memory: %d record(s) in the memory of session %r hold no session item "
                "(written by another program, or cut short by a crash); they are skipped",
                foreign,
                self.agent,
            )
        return _Stored(parsed, items, position)

    def _merged(self, stored: _Stored) -> list[Item]:
        """The readable stored items with the kept-off-disk ones in their places."""
        merged: list[Item] = []
        items, i = stored.items, 0
        for before, item in self._unsaved:
            while i < len(items) and items[i][1] < before:
                merged.append(items[i][2])
                i += 1
            merged.append(item)
        return merged + [item for _, _, item in items[i:]]

    def items(self, limit: int | None) -> list[Item]:
        """The session's items, oldest first; ``limit`` > 0: the newest ``limit``, 0: none."""
        items = self._merged(self._stored(self._open()))
        if limit is None or limit < 0:  # negative: no limit, as the SDK's SQLiteSession
            return items
        return items[-limit:] if limit else []

    # -- writing -------------------------------------------------------

    def add(self, items: list[Any]) -> None:
        """Append ``items`` as one write (all or none reach disk), through the persist gate."""
        if not items:
            return
        texts, blocks = render_items(
            items,
            session_id=self.agent,
            timestamp=self._clock.now().isoformat(),
            subject_id=self.subject_id,
        )
        store = self._open()
        gov = self.governance
        if gov is None:
            store.ensure()
            store.append(blocks)
            return
        if gov.check("persist", self.agent, self.subject_id).persist:
            store.ensure()  # a consent-less subject gets no memory, not even a header
        if not gov.persist(store, blocks, agent=self.agent, subject_id=self.subject_id):
            # Kept off disk, in this object only: a restart does not see them.
            # Placed after the subject's records on disk, readable now or not.
            before = self._stored(store).records
            self._unsaved += [(before, json.loads(text)) for text in texts]

    def pop(self) -> Item | None:
        """Remove and return the newest item (None when there is none)."""
        store = self._open()
        self._check_holds("pop_item", "session.pop")
        with store.lock():
            parsed, stored, count = self._stored(store)
            if self._unsaved and self._unsaved[-1][0] >= count:
                # Kept off disk: nothing to rewrite, still a deletion (as clear records it).
                self._audit("session.pop", "ok", records=0, memory_only=1)
                return self._unsaved.pop()[1]
            if parsed is None or not stored:
                return None
            index, _, item = stored[-1]
            raw = parsed.records[index].raw
            rest = "".join(r.raw for i, r in enumerate(parsed.records) if i != index)
            self._rewrite(
                store, "session.pop", parsed.preamble + rest, records=1, bytes=len(raw.encode())
            )
        return item

    def clear(self) -> None:
        """Remove every item of the session (its subject's item records), stored or kept off disk.

        Records of the subject that hold no item (a Conversation's on the same
        agent) are not the session's: they stay.
        """
        store = self._open()
        self._check_holds("clear_session", "session.clear")
        with store.lock():
            text = store.read_memory()
            parsed = parse_memory(text) if text is not None else None
            kept = [r for r in parsed.records if not self._holds_item(r)] if parsed else []
            removed = len(parsed.records) - len(kept) if parsed else 0
            dropped, self._unsaved = len(self._unsaved), []
            if parsed is not None and removed:
                text = parsed.preamble + "".join(r.raw for r in kept)
                self._rewrite(store, "session.clear", text, records=removed, memory_only=dropped)
                return
        self._audit("session.clear", "ok", records=0, memory_only=dropped)

    def _holds_item(self, record: Record) -> bool:
        return record.subject_id == self.subject_id and decode_item(record) is not None

    def _rewrite(self, store: AgentStore, event: str, text: str, **attrs: Any) -> None:
        try:
            store.rewrite_memory(text)
        except BaseException as exc:
            self._audit(event, "error", error=type(exc).__name__, **attrs)
            raise
        self._audit(event, "ok", **attrs)

    # -- holds and audit -----------------------------------------------

    def _check_holds(self, operation: str, event: str) -> None:
        """Refuse ``operation`` (it deletes) while a legal hold covers the session or its subject."""
        registry = self._holds
        if registry is None:
            registry = self._holds = subject_context(self.governance or self._workspace).holds
            assert registry is not None  # subject_context always builds the registry
        holds = registry.holds_for(agent=self.agent, subject=self.subject_id)
        if holds:
            self._audit(event, "blocked", holds=[h.id for h in holds])
            raise ErasureBlockedError(f"session {self.agent!r} ({operation})", holds)

    def _audit(self, event: str, outcome: str, **attrs: Any) -> None:
        gov = self.governance
        if gov is None:
            return
        gov.audit.record(
            event,
            agent=self.agent,
            subject_id=self.subject_id,
            outcome=outcome,
            policy_id=gov.policy.id,
            policy_version=gov.policy.version,
            **attrs,
        )

    def close(self) -> None:
        """Release the open store; using the session again reopens it."""
        if self._store is not None:
            self._store.close()
            self._store = None
