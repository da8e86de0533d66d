"""Tables (``_cli/_render.py``): the direct layout is rich's, byte for byte, where it is used."""

from __future__ import annotations

import io

from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console
from rich.table import Table
from rich.text import Text

from governed_memory._cli._render import WIDTH, _simple_table

ASCII = st.text(alphabet=st.characters(min_codepoint=32, max_codepoint=126), max_size=14)
ANY = st.text(max_size=8)


def _rich(title: str | None, columns: list[str], cells: list[list[str]]) -> str:
    table = Table(title=title, show_lines=False)
    for column in columns:
        table.add_column(column)
    for row in cells:
        table.add_row(*(Text(cell) for cell in row))
    out = io.StringIO()
    Console(file=out, soft_wrap=False, width=WIDTH).print(table)
    return out.getvalue()


def _tables(
    cell: st.SearchStrategy[str],
) -> st.SearchStrategy[tuple[str | None, list[str], list[list[str]]]]:
    return st.integers(1, 7).flatmap(
        lambda n: st.tuples(
            st.one_of(st.none(), cell),
            st.lists(cell.filter(bool), min_size=n, max_size=n),
            st.lists(st.lists(cell, min_size=n, max_size=n), max_size=8),
        )
    )


@settings(max_examples=300, deadline=None)
@given(_tables(ASCII))
def test_a_table_laid_out_directly_is_the_one_rich_prints(
    table: tuple[str | None, list[str], list[list[str]]],
) -> None:
    title, columns, cells = table
    simple = _simple_table(title, columns, cells)
    if simple is not None:
        assert simple + "\n" == _rich(title, columns, cells)


@settings(max_examples=200, deadline=None)
@given(_tables(ANY))
def test_text_rich_must_measure_is_left_to_rich(
    table: tuple[str | None, list[str], list[list[str]]],
) -> None:
    title, columns, cells = table
    texts = [title or "", *columns, *(c for row in cells for c in row)]
    if any(not t.isascii() or not t.isprintable() for t in texts):
        assert _simple_table(title, columns, cells) is None


def test_plain_listings_take_the_direct_layout() -> None:
    cells = [
        [f"agent-{i:04d}", str(i), "1", "10.0 KiB", "2026-12-01 10:00:00", "0"] for i in range(50)
    ]
    columns = ["agent", "messages", "archives", "size", "last activity", "subject memories"]
    simple = _simple_table("Agents in /srv/ws", columns, cells)
    assert simple is not None
    assert simple + "\n" == _rich("Agents in /srv/ws", columns, cells)


def test_a_table_wider_than_the_layout_is_left_to_rich() -> None:
    columns = ["a", "b"]
    assert _simple_table(None, columns, [["x" * WIDTH, "y"]]) is None
