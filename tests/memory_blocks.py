"""Blocks of memory text as the tests write them, and the turns read back from a memory."""

from __future__ import annotations

from governed_memory import parse_memory
from governed_memory._format import render_block

TS = "2026-11-30T10:00:00"


def block(text: str, subject: str | None = None) -> str:
    """One Human turn saying ``text``, about ``subject`` when given."""
    meta = {"subject": subject} if subject is not None else None
    return render_block("Human", TS, text, meta)


def contents(text: str | None) -> list[str]:
    """The turns of a memory's text, oldest first (the memory must exist)."""
    assert text is not None
    return [r.content for r in parse_memory(text).records]
