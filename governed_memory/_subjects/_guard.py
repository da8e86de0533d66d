"""What a live, governed Conversation does about erasures of its agent's data.

An erasure rewrites the files on disk, but a Conversation opened before it
still holds the erased messages in memory (its preload and its own turns).
The only way those could reach disk again is a compaction: the summary the
LLM writes from the history. So:

* on open, before the preload, this agent's part of each pending erasure
  that covers it is done (an interrupted erasure never gets preloaded back;
  if that part fails, the open fails), then the other agents' parts are
  tried without failing the open (another agent's damaged file is not this
  one's problem), and the tombstones present are remembered;
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
stop new storage, withdraw consent).

Rectifications are watched the same way: the ids present on open are
remembered (a pending one is not: the preload may hold the old text), and
:meth:`ErasureGuard.new_rectifications` reports those of this agent completed
since, with the record's content as it is now on disk, so the Conversation
puts the corrected text into its history before summarising it.

Cost when nothing happened: two directory listings per compaction.
"""

from __future__ import annotations

from .._memory import filter_history
from .._protocols import Erased, Rectified
from .._records import RectificationStore
from ._context import SubjectContext
from ._erasure import complete_tombstone

# filter_history (the pure step over the history) lives with the Conversation
# it serves; it is re-exported here, where it was defined before.
__all__ = ["Erased", "ErasureGuard", "filter_history"]


class ErasureGuard:
    """Watches the tombstones of a workspace on behalf of one agent's Conversation.

    The :class:`~governed_memory._protocols.ErasureWatch` that
    ``Governance.erasure_watch`` hands a governed Conversation.
    """

    def __init__(self, ctx: SubjectContext, agent: str) -> None:
        self._ctx = ctx
        self._agent = agent
        self._tombs = ctx.tombstones()
        self._seen: set[str] = set()
        self._rectifications = RectificationStore(ctx.governance_dir, sealing=ctx.sealing)
        self._rectified: set[str] = set()

    def on_open(self) -> None:
        """Complete this agent's part of pending erasures covering it; remember the rest as seen.

        Only this agent's part must succeed: an erasure another agent cannot
        finish (a damaged file there) stays pending for ``erasures resume``.

        Raises:
            StorageError: this agent's own part could not be done; nothing is
                preloaded (the message names the file, the error and the fix).
        """
        ids = self._tombs.ids()
        for tombstone in self._tombs.pending():
            if tombstone.scope.covers_agent(self._agent):
                complete_tombstone(self._ctx, tombstone, resumed=True, first=self._agent)
        self._seen = set(ids)
        # The preload reads the corrected files; a pending rectification may
        # still rewrite them after it, so it is reported once complete.
        self._rectified = set(self._rectifications.settled_ids()[1])

    def marks(self) -> frozenset[str]:
        """Every tombstone and rectification id of the workspace (two listings; completes nothing).

        A rectification is named again (``<id>:done``) once complete, so one
        that completes while a compaction waits is seen as new.
        """
        ids, done = self._rectifications.settled_ids()
        return frozenset(self._tombs.ids()) | ids | {f"{i}:done" for i in done}

    def new_rectifications(self) -> tuple[Rectified, ...]:
        """This agent's rectifications completed since the open or the last call, with the new content.

        A pending one is reported once it completes; one whose record is gone
        since (erased, purged) is not reported.
        """
        from ._rectify import subject_records

        found: list[Rectified] = []
        for rectification_id in sorted(self._rectifications.settled_ids()[1] - self._rectified):
            item = self._rectifications.get(rectification_id)
            if item is not None and item.pending:
                continue  # its receipt is not written yet: reported on a later call
            self._rectified.add(rectification_id)
            if item is None or item.agent != self._agent:
                continue
            records = subject_records(self._ctx, item.subject, agent=self._agent)
            content = next((r.content for r in records if r.id == item.record_id), None)
            if content is not None:
                found.append(
                    Rectified(item.record_id, item.subject, item.salt, item.old_hashes, content)
                )
        return tuple(found)

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
                # Finish this agent's part first, so the preload re-read afterwards is clean.
                complete_tombstone(self._ctx, tombstone, resumed=True, first=self._agent)
            if tombstone.scope.subject is None:
                whole = True
            else:
                subjects.add(tombstone.scope.subject)
        self._seen.update(fresh)
        return Erased(frozenset(subjects), whole)
