"""What a live Conversation drops from its history after an erasure of its agent's data.

An erasure rewrites the files on disk; a Conversation opened before it still
holds the erased messages in memory (its preload and its own turns). The
gate's :class:`~governed_memory._protocols.ErasureWatch` says which subjects
(or the whole agent) were erased since; :func:`filter_history` is the pure
step that removes their messages, so no later summary is built from them.

``Conversation.compact`` reads the watch's ``marks()`` again under the
agent's lock: an erasure writes its tombstone before it takes any agent's
lock, so a tombstone that is not there yet belongs to an erasure that has not
reached this agent and will strip the summary (by its lineage) after the
write. Listing ids completes nothing, so it cannot wait on the erasure it
finds (which may itself be waiting for the lock held).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .._format import PRELOAD_PREFIX, message_subjects
from .._protocols import Erased

__all__ = ["filter_history", "is_preload"]


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
