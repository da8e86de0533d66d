"""What a live, governed Conversation does about erasures of its agent's data.

An erasure rewrites the files on disk, but a Conversation opened before it
still holds the erased messages in memory (its preload and its own turns).
The only way those could reach disk again is a compaction: the summary the
LLM writes from the history. So:

* on open, before the preload, pending erasures that cover the agent are
  completed (an interrupted erasure never gets preloaded back), and the
  tombstones present are remembered;
* before summarising (``Conversation.drop_erased()``, which the compressor
  calls) and again inside ``compact()``, tombstones that appeared since are
  read; messages of their subjects (and summaries whose lineage names them)
  are dropped from the history, and the preload is re-read from the now clean
  MEMORY.md. If ``compact()`` had to drop anything, the summary it was given
  was built from erased messages: it raises
  :class:`ErasedDuringCompactionError` and writes nothing, so the caller
  summarises again.

New messages of an erased subject added afterwards are written only if the
consent gate allows them (the erasure covered what was stored up to it; to
stop new storage, withdraw consent). Cost when nothing happened: one
directory listing per compaction.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .._format import PRELOAD_PREFIX, message_subjects
from ._context import SubjectContext
from ._erasure import complete_tombstone

__all__ = ["Erased", "ErasureGuard", "filter_history"]


@dataclass(frozen=True)
class Erased:
    """Erasures that appeared since a Conversation loaded: subjects, or the whole agent."""

    subjects: frozenset[str] = frozenset()
    whole_agent: bool = False

    def __bool__(self) -> bool:
        return bool(self.subjects) or self.whole_agent


def is_preload(message: Mapping[str, Any]) -> bool:
    """Whether ``message`` is the preloaded MEMORY.md."""
    content = message.get("content")
    return (
        message.get("role") == "System"
        and "timestamp" not in message
        and isinstance(content, str)
        and content.startswith(PRELOAD_PREFIX)
    )


def filter_history(
    history: Sequence[dict[str, Any]],
    erased: Erased,
    *,
    static_count: int,
    preload_subjects: set[str],
) -> tuple[list[dict[str, Any]], int, int | None]:
    """The history without erased messages.

    Returns ``(kept, dropped, preload_at)``: ``preload_at`` is the index in
    ``kept`` where a fresh preload must be inserted (the old one named an
    erased subject, or the whole agent went), else None. The first
    ``static_count`` messages (system prompt, rules) are always kept.
    """
    kept: list[dict[str, Any]] = list(history[:static_count])
    dropped = 0
    preload_at: int | None = None
    for message in history[static_count:]:
        if is_preload(message):
            if erased.whole_agent or preload_subjects & erased.subjects:
                preload_at = len(kept)
                dropped += 1
                continue
        elif erased.whole_agent or message_subjects(message) & erased.subjects:
            dropped += 1
            continue
        kept.append(message)
    return kept, dropped, preload_at


class ErasureGuard:
    """Watches the tombstones of a workspace on behalf of one agent's Conversation."""

    def __init__(self, ctx: SubjectContext, agent: str) -> None:
        self._ctx = ctx
        self._agent = agent
        self._tombs = ctx.tombstones()
        self._seen: set[str] = set()

    def on_open(self) -> None:
        """Complete pending erasures covering this agent; remember the rest as seen."""
        ids = self._tombs.ids()
        for tombstone in self._tombs.pending():
            if tombstone.scope.covers_agent(self._agent):
                complete_tombstone(self._ctx, tombstone, resumed=True)
        self._seen = set(ids)

    def new_erasures(self) -> Erased:
        """Erasures covering this agent that appeared since the last call (completed first)."""
        fresh = [i for i in self._tombs.ids() if i not in self._seen]
        subjects: set[str] = set()
        whole = False
        for erasure_id in fresh:
            tombstone = self._tombs.get(erasure_id)
            if tombstone is None or not tombstone.scope.covers_agent(self._agent):
                continue
            if tombstone.pending:
                # Finish it first, so the preload re-read afterwards is clean.
                complete_tombstone(self._ctx, tombstone, resumed=True)
            if tombstone.scope.subject is None:
                whole = True
            else:
                subjects.add(tombstone.scope.subject)
        self._seen.update(fresh)
        return Erased(frozenset(subjects), whole)
