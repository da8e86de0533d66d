"""An erasure across agents, a batch at a time: locked, planned, logged once, changed, synced once.

For each batch of :data:`BATCH` agents (one at a time for a whole-agent
erasure), in the order :func:`erasure_agents` gives (sorted: two erasures
never wait on each other's locks in a cycle):

1. each agent is locked, and each of its memories that may hold the subject
   (:meth:`SubjectContext.memories_for`) locked and planned (``_removal``):
   what each file loses, or the subject's own memory deleted whole;
2. the plans of the whole batch are logged with one write and one fsync, so
   a crash from here on is resumed with exact counts;
3. each memory is rewritten or deleted, each new file fsynced before its
   rename, each folder put in a :class:`FolderSync`;
4. the locks are released; after the last batch every folder is fsynced,
   before the caller writes the receipt.

Failures stay local: an agent with a link, a memory that cannot be read or
changed, is returned as :class:`Unfinished`, and the rest goes on. An agent
read in full (no lineage index) gets its index written (see
``AgentFolderStore.lineage_index``), so the next request reads only what
may hold its subject.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from contextlib import ExitStack, nullcontext, suppress
from dataclasses import dataclass

from .._base import AGENTS_DIR, validate_agent_name
from .._errors import GovernedMemoryError
from .._format import subjects_in_text
from .._records import Tombstone, TombstoneStore
from .._stores import AgentFolderStore, AgentStore, FolderSync
from ._context import SubjectContext, partition_of
from ._removal import Cursor, Held, Step, delete_agent, plan_memory, remove_temps, sources
from ._unfinished import Unfinished, links_in_agent, unfinished_from

__all__ = ["BATCH", "erase_agents"]

BATCH = 64
"""Agents erased together: their plans logged with one fsync, their folders fsynced in one pass."""


@dataclass(frozen=True)
class _Run:
    """One run of an erasure: where, what, and the day and holds it was started with."""

    ctx: SubjectContext
    tombs: TombstoneStore
    tombstone: Tombstone
    day: _dt.date
    held: Held


def erase_agents(
    ctx: SubjectContext,
    tombs: TombstoneStore,
    tombstone: Tombstone,
    names: list[str],
    day: _dt.date,
    held: Held,
    progress: Callable[[str, int, int], None] | None = None,
) -> list[Unfinished]:
    """The erasure in each agent of ``names``; what it could not do (nothing: []).

    A batch of agents at a time (:data:`BATCH`), each under its lock: every
    memory of the batch is planned, the plans are logged with one fsync,
    then the files change, each new file fsynced and each folder once, in
    one pass before this returns. A whole-agent erasure goes agent by agent.
    """
    run = _Run(ctx, tombs, tombstone, day, held)
    failed: list[Unfinished] = []
    sync = FolderSync()
    try:
        step = BATCH if tombstone.scope.subject is not None else 1
        for start in range(0, len(names), step):
            chunk = names[start : start + step]
            failed += _erase_batch(run, chunk, sync)
            if progress is not None:
                for offset, name in enumerate(chunk, start=start + 1):
                    progress(name, offset, len(names))
    finally:
        sync.flush()  # before any receipt: every rename and deletion durable
    return failed


def _erase_batch(run: _Run, names: list[str], sync: FolderSync) -> list[Unfinished]:
    ctx = run.ctx
    failed: list[Unfinished] = []
    steps: list[Step] = []
    with ExitStack() as batch:
        for name in names:
            if ctx.on_files and (run.tombstone.scope.subject is None or _linked(ctx, name)):
                # Nothing of an agent with a link in it is touched: the store would
                # follow the link (or refuse it halfway); the admin resolves it first.
                links = links_in_agent(ctx.workspace, name)
                if links:
                    failed += links
                    continue
            with ExitStack() as agent:
                try:
                    found = _plan_agent(run, name, agent, failed)
                except (GovernedMemoryError, OSError) as exc:
                    failed.append(unfinished_from(name, f"{AGENTS_DIR}/{name}", exc))
                    continue
                steps += found
                batch.enter_context(agent.pop_all())  # locks held until the batch is done
        lines = [s.line for s in steps if s.line is not None]
        try:
            run.tombs.log_progress_lines(run.tombstone.id, lines)
        except (GovernedMemoryError, OSError) as exc:
            agents = sorted({s.agent for s in steps})
            return failed + [unfinished_from(a, f"{AGENTS_DIR}/{a}", exc) for a in agents]
        for step in steps:
            try:
                _apply(ctx, step, sync)
            except (GovernedMemoryError, OSError) as exc:
                failed.append(unfinished_from(step.agent, step.at.file, exc))
    return failed


def _linked(ctx: SubjectContext, name: str) -> bool:
    """Whether the agent folder itself is a link (checked before it is opened and locked)."""
    return (ctx.agents_dir / name).is_symlink()


def _plan_agent(run: _Run, name: str, stack: ExitStack, failed: list[Unfinished]) -> list[Step]:
    """Lock agent ``name`` (on ``stack``) and plan each of its memories; [] when it has none.

    A memory that cannot be read is added to ``failed``; the others are
    planned. Every temporary file in each memory's folders goes first (a
    crashed compaction's may hold the subject's text). A whole-agent
    erasure is done here (deleted under the lock), returning no step.
    """
    ctx, tombstone = run.ctx, run.tombstone
    subject = tombstone.scope.subject
    if not ctx.has_agent(name):
        return []
    store = ctx.open_store(validate_agent_name(name))
    stack.callback(store.close)
    stack.enter_context(store.lock())
    if subject is None:
        delete_agent(ctx, run.tombs, tombstone, name, store)
        return []
    walk = stack.enter_context(ctx.memories_for(store, subject))
    if ctx.on_files:
        # The links where this erasure reads (every memory's, without an index).
        links = links_in_agent(ctx.workspace, name, walk.partitions)
        if links:
            failed += links
            return []
    own = partition_of(store, subject) if len(walk.memories) > 1 else None
    steps: list[Step] = []
    texts: dict[str | None, list[str]] = {}
    for memory in walk.memories:
        at = Cursor(ctx.source(memory))
        try:
            remove_temps(memory, whole_agent=walk.complete)
            found = sources(ctx, memory, at)
            texts[memory.partition] = [text for _, text in found]
            whole = memory.partition is not None and memory.partition == own
            step = plan_memory(
                ctx, tombstone, name, memory, found, run.day, run.held, at, whole=whole
            )
        except (GovernedMemoryError, OSError) as exc:
            failed.append(unfinished_from(name, at.file, exc))
            continue
        if step is not None:
            steps.append(step)
    if (
        walk.complete
        and len(texts) == len(walk.memories)
        and any(p is not None and p != own for p in texts)
    ):
        # Every memory read, and one stays beside the subject's: the next request
        # on this agent reads only what the index allows.
        _write_index(store, texts)
    return steps


def _write_index(store: AgentStore, texts: dict[str | None, list[str]]) -> None:
    """After reading every memory of the agent: record which may hold others' data.

    Read before this erasure changed them, so the list is a superset: a
    memory whose summaries named the erased subject only is listed until
    the next full walk. Best effort: without it the next walk reads all.
    """
    if not isinstance(store, AgentFolderStore):
        return
    mixed = [
        partition
        for partition, found in texts.items()
        if partition is not None
        and any(
            store.partition_name(s) != partition for text in found for s in subjects_in_text(text)
        )
    ]
    with suppress(GovernedMemoryError, OSError):
        store.write_lineage_index(mixed)


def _apply(ctx: SubjectContext, step: Step, sync: FolderSync) -> None:
    """Delete or rewrite ``step``'s memory; the file backend's folders fsynced by ``sync``."""
    memory = step.memory
    with memory.syncing(sync) if isinstance(memory, AgentFolderStore) else nullcontext():
        if step.delete:
            # Under the subject's lock (and the agent's): a writer waiting on it finds
            # the folder gone and starts a new, empty memory.
            memory.delete()
            return
        for item, text in step.edits:
            step.at.file = ctx.source(memory, item)
            if item is None:
                memory.rewrite_memory(text)
            else:
                memory.rewrite_archive(item, text)
