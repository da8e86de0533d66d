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


def emit_table(title: str | None, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """Print a table on stdout (plain text when not a terminal)."""
    table = Table(title=title, show_lines=False)
    for column in columns:
        table.add_column(column)
    for row in rows:
        # Text, not str: cells hold data (names, paths, content) that rich
        # would otherwise parse as markup ("[/x]" raises, "[b]" vanishes).
        table.add_row(*(Text("" if cell is None else str(cell)) for cell in row))
    Console(soft_wrap=False, width=160).print(table)
