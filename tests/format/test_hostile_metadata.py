"""A metadata line that is not the flat object the library writes never breaks the parser."""

from __future__ import annotations

import pytest

from governed_memory import parse_memory
from governed_memory._format._records import render_header

DEPTH = 100_000


def _memory(meta_line: str) -> str:
    return (
        render_header("c", "2026-01-01T00:00:00")
        + f"### Human \u2014 2026-01-01T00:00:01\n{meta_line}\n\nhello\n\n---\n\n"
        + '### Human \u2014 2026-01-01T00:00:02\n<!-- gm {"subject":"s1"} -->\n\nmine\n\n---\n\n'
    )


@pytest.mark.parametrize(
    "nested",
    ["[" * DEPTH + "]" * DEPTH, '{"a":' * DEPTH + "1" + "}" * DEPTH],
    ids=["list", "object"],
)
def test_deeply_nested_metadata_stays_content_instead_of_a_recursion_error(nested: str) -> None:
    meta_line = f"<!-- gm {nested} -->"
    parsed = parse_memory(_memory(meta_line))
    first, second = parsed.records
    assert first.meta == {}
    assert first.content == f"{meta_line}\n\nhello"
    assert second.subject_id == "s1"
