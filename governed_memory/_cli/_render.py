"""Output helpers shared by CLI commands: tables for people, JSON for scripts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import click
from rich.console import Console
from rich.table import Table
from rich.text import Text

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
    table = Table(title=title, show_lines=False)
    for index, column in enumerate(columns):
        if column in whole:
            width = max((len(str(row[index] or "")) for row in rows), default=0)
            table.add_column(column, no_wrap=True, min_width=max(width, len(column)))
        else:
            table.add_column(column)
    for row in rows:
        # Text, not str: cells hold data (names, paths, content) that rich
        # would otherwise parse as markup ("[/x]" raises, "[b]" vanishes).
        table.add_row(*(Text("" if cell is None else str(cell)) for cell in row))
    Console(soft_wrap=False, width=160).print(table)
