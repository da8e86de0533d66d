"""Subject isolation in a Conversation: which records it preloads, which turns a compaction summarises.

Under the policy's ``memory.isolation = "subject"`` a Conversation for subject
S reads two memories: the agent's own (records that name no subject, shared
by every conversation of the agent) and S's (``AgentStore.subject_store``).
:func:`isolated_preload` builds the preload from them; :func:`sort_turns`
sorts a history into what a compaction keeps and what it summarises. Both are
pure apart from reading the stores and asking the gate; the Conversation
holds the state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .._format import (
    PRELOAD_PREFIX,
    Record,
    has_records,
    message_subjects,
    newest_records,
    parse_memory,
    record_subjects,
)
from .._protocols import AgentStore, ConsentGate
from ._erasures import is_preload

__all__ = ["IsolatedPreload", "Parts", "isolated_preload", "sort_turns"]

Message = dict[str, Any]


@dataclass
class IsolatedPreload:
    """The preload messages (shared first), the shared one itself, and the subjects preloaded."""

    messages: list[Message]
    shared: Message | None
    subjects: set[str]


def isolated_preload(
    agent_store: AgentStore,
    own_store: AgentStore | None,
    subject: str | None,
    gate: ConsentGate[AgentStore],
    max_chars: int | None,
) -> IsolatedPreload:
    """The agent's subject-free records, then ``subject``'s own, as at most two preload messages.

    Two messages, so a compaction can keep the first (records every subject
    of the agent shares) and summarise only the second. A record is shown
    only when every subject it holds (its own and its lineage) is
    ``subject``: nothing of anyone else, wherever it was stored. ``own_store``
    None: a conversation without subject, which reads the agent's memory
    alone. ``max_chars`` bounds both together, the newest records kept.
    """
    wanted = set() if subject is None else {subject}
    stores = [agent_store] if own_store is None else [agent_store, own_store]
    parts: list[tuple[str, list[Record]]] = []
    for i, store in enumerate(stores):
        text = store.read_memory()
        if text is None or not has_records(text):
            parts.append(("", []))
            continue
        parsed = parse_memory(text)
        allowed = set() if i == 0 else wanted
        records = [r for r in parsed.records if record_subjects(r) <= allowed]
        parts.append((parsed.preamble, gate.preload_records(records, agent=agent_store.agent)))
    if max_chars is not None:
        # The newest records of both that fit with both preambles (the single-memory bound).
        preambles = "".join(p for p, records in parts if records)
        combined = [(i, r) for i, (_, records) in enumerate(parts) for r in records]
        fitting = len(newest_records(preambles, [r for _, r in combined], max_chars))
        kept = combined[len(combined) - fitting :]
        parts = [(p, [r for j, r in kept if j == i]) for i, (p, _) in enumerate(parts)]
    result = IsolatedPreload([], None, set())
    for i, (preamble, records) in enumerate(parts):
        if not records:
            continue
        text = preamble + "".join(record.raw for record in records)
        if "\r" in text:  # the reference reads MEMORY.md in text mode: universal newlines
            text = text.replace("\r\n", "\n").replace("\r", "\n")
        message: Message = {"role": "System", "content": PRELOAD_PREFIX + text}
        if i == 0 and own_store is not None:
            result.shared = message
        else:
            for record in records:
                result.subjects |= record_subjects(record)
        result.messages.append(message)
    return result


@dataclass
class Parts:
    """The turns of a history as a compaction sorts them (see :func:`sort_turns`)."""

    shared: list[Message] = field(default_factory=list)  # the agent's shared preload: kept
    own: list[Message] = field(default_factory=list)  # summarised
    others: list[Message] = field(default_factory=list)  # other subjects' (isolation): kept
    left_out: list[Message] = field(default_factory=list)  # without consent: kept when left out


def sort_turns(
    turns: Sequence[Message],
    *,
    mine: set[str] | None,
    shared_preload: Message | None,
    preload_subjects: set[str],
    left_out: set[str],
) -> Parts:
    """Sort the turns after the static context by what a compaction does with them.

    ``mine`` None: no isolation, every turn is the conversation's own. Else
    the preloaded subject-free records (``shared_preload``) are kept as they
    are, and a message holding any subject outside ``mine`` is another
    subject's. Turns holding a subject in ``left_out`` (no ``persist``
    consent, under ``summarization.without_consent = "leave_out"``) are set
    apart as well. A preload message holds ``preload_subjects``.
    """
    parts = Parts()
    for message in turns:
        if mine is not None and message is shared_preload:
            parts.shared.append(message)
            continue
        held = preload_subjects if is_preload(message) else message_subjects(message)
        if mine is not None and not held <= mine:
            parts.others.append(message)
        elif held & left_out:
            parts.left_out.append(message)
        else:
            parts.own.append(message)
    return parts
