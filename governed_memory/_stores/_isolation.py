"""Moving an agent's shared memory to one memory per data subject (``isolation = "subject"``).

Under ``[memory] isolation = "subject"`` each data subject's records live in
the subject's own memory of the agent (``AgentStore.subject_store``); the
agent's own memory keeps only records that name no subject. Memory written
before the policy said so holds every subject's records in the agent's own
memory: :func:`isolate_subjects` moves each record that names a subject to
that subject's memory, unchanged (its metadata, lineage and timestamp kept),
and leaves the rest where it is. Archives are not moved: they are never
preloaded, and export, erasure and retention read them where they are.

Crash safety: each subject's memory is replaced atomically by its old text
plus the moved records, then the agent's memory atomically by what stays. A
crash between the two leaves the moved records in both places; the next run
finds them already in the subject's memory, in one piece, and does not copy
them again (records carry their timestamp to the microsecond, so a run of the
same blocks is a copy, not new words). A subject memory that receives a
record naming another subject too (a summary from before isolation) is
listed in the agent's lineage index first (``AgentFolderStore.lineage_index``). Nothing is ever only in flight. Backend-neutral: it uses the storage
seam's methods only.
"""

from __future__ import annotations

from .._format import META_OPEN, Record, parse_memory, record_subjects
from ._base import AgentStore
from ._files import AgentFolderStore

__all__ = ["isolate_subjects"]


def isolate_subjects(store: AgentStore) -> int:
    """Move the records of ``store`` (an agent's own memory) that name a subject to the subject's memory.

    Holds the agent's lock throughout, and each subject's lock while its
    memory is written (always in that order). Returns how many records were
    moved (0: nothing to do, and nothing was written).
    """
    with store.lock():
        text = store.read_memory()
        if text is None or META_OPEN not in text:
            return 0  # no record names a subject
        parsed = parse_memory(text)
        moving: dict[str, list[Record]] = {}
        staying: list[Record] = []
        for record in parsed.records:
            subject = record.subject_id
            if not subject:  # None, or an empty id no subject memory can be named by
                staying.append(record)
            else:
                moving.setdefault(subject, []).append(record)
        if not moving:
            return 0
        for subject, records in moving.items():
            target = store.subject_store(subject)
            try:
                moved = "".join(record.raw for record in records)
                mixed = any(record_subjects(r) - {subject} for r in records)
                if mixed and isinstance(store, AgentFolderStore) and target.partition is not None:
                    # Listed before it is written: export and erasure of the others read it.
                    store.note_mixed_lineage(target.partition)
                with target.lock():
                    target.ensure()
                    current = target.read_memory() or ""
                    # Already there, in one piece: copied by a run a crash stopped before
                    # it rewrote the agent's memory (the subject may have written since).
                    if moved not in current:
                        target.rewrite_memory(current + moved)
            finally:
                target.close()
        store.rewrite_memory(parsed.preamble + "".join(record.raw for record in staying))
        return sum(len(records) for records in moving.values())
