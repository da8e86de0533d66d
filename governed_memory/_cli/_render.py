"""Output helpers shared by CLI commands: tables for people, JSON for scripts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click

__all__ = ["emit_json", "emit_table", "json_option"]

json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")


def emit_json(data: Any) -> None:
    """Print ``data`` as indented JSON on stdout."""
    click.echo(json.dumps(data, indent=2, ensure_ascii=False, default=str))


def emit_table(
    title: str | None,
    columns: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    whole: Sequence[str] = (),
) -> None:
    """Print a table on stdout (plain text when not a terminal).

    The cells of the ``whole`` columns (ids people copy into the next
    command) are never cut or wrapped; the other columns make room.
    """
    cells = [["" if cell is None else str(cell) for cell in row] for row in rows]
    simple = _simple_table(title, columns, cells)
    if simple is not None:
        click.echo(simple)
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    table = Table(title=title, show_lines=False)
    for index, column in enumerate(columns):
        if column in whole:
            width = max((len(row[index]) for row in cells), default=0)
            table.add_column(column, no_wrap=True, min_width=max(width, len(column)))
        else:
            table.add_column(column)
    for row in cells:
        # Text, not str: cells hold data (names, paths, content) that rich
        # would otherwise parse as markup ("[/x]" raises, "[b]" vanishes).
        table.add_row(*(Text(cell) for cell in row))
    Console(soft_wrap=False, width=WIDTH).print(table)


WIDTH = 160
"""Tables are laid out for this many columns, terminal or not (scripts get stable lines)."""


def _plain(text: str) -> bool:
    return text.isascii() and text.isprintable() and text == text.strip()


def _simple_table(title: str | None, columns: Sequence[str], cells: list[list[str]]) -> str | None:
    """The table exactly as rich lays it out, when nothing needs rich: else None.

    rich measures, wraps and crops every cell, about 1 ms per row of a large
    listing (``agents`` over 1,000 agents spent a second on its table). When
    every cell is printable ASCII without surrounding spaces, the table fits
    in :data:`WIDTH` and the title fits above it, rich's layout is just
    padded columns between box-drawing lines, written here directly. A test
    compares the two over generated tables.
    """
    texts = [*columns, *(cell for row in cells for cell in row)]
    if not all(_plain(text) for text in texts):
        return None
    # rich reads the title and the headers as markup: only markup-free ones are laid out here
    if any("[" in text or "\\" in text for text in [*columns, title or ""]):
        return None
    widths = [
        max([len(column), *(len(row[i]) for row in cells)]) for i, column in enumerate(columns)
    ]
    total = sum(width + 3 for width in widths) + 1
    if total > WIDTH or (title is not None and (not _plain(title) or len(title) > total)):
        return None
    lines = []
    if title:
        left = (total - len(title)) // 2
        lines.append(" " * left + title + " " * (total - len(title) - left))
    lines.append("┏" + "┳".join("━" * (w + 2) for w in widths) + "┓")
    lines.append("┃ " + " ┃ ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)) + " ┃")
    lines.append("┡" + "╇".join("━" * (w + 2) for w in widths) + "┩")
    for row in cells:
        lines.append("│ " + " │ ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)) + " │")
    lines.append("└" + "┴".join("─" * (w + 2) for w in widths) + "┘")
    return "\n".join(lines)
