"""docs/cli.md names every option of every command in that command's section.

An option an operator cannot find in the manual (``--actor`` of ``show``,
``audit keygen --from-master-key``) might as well not exist.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import click

import governed_memory
from governed_memory._cli import main

DOCS = Path(governed_memory.__file__).parent.parent / "docs" / "cli.md"


def _commands(
    command: click.Command, path: tuple[str, ...] = ()
) -> Iterator[tuple[str, click.Command]]:
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _commands(sub, (*path, name))
    else:
        yield " ".join(path), command


def _section(text: str, name: str) -> str:
    found = re.search(
        rf"^### governed-memory {re.escape(name)}\n(.*?)(?=^##|\Z)", text, re.S | re.M
    )
    assert found, f"docs/cli.md has no section for {name}"
    return found.group(1)


def test_every_option_is_in_its_command_section() -> None:
    text = DOCS.read_text(encoding="utf-8")
    missing = [
        f"{name} {opt}"
        for name, command in _commands(main)
        for param in command.params
        if isinstance(param, click.Option)
        for opt in param.opts
        if opt.startswith("--") and opt != "--help" and opt not in _section(text, name)
    ]
    assert missing == []


def test_the_actor_rule_is_written_once_and_linked() -> None:
    text = DOCS.read_text(encoding="utf-8")
    settings = (DOCS.parent / "settings.md").read_text(encoding="utf-8")
    assert "### Who acted: one rule" in settings
    assert "cli:<login>" in settings and "cli:<login>" in text
    assert "settings.md#who-acted-one-rule" in text


def test_show_is_documented_as_audited() -> None:
    assert "memory.show" in _section(DOCS.read_text(encoding="utf-8"), "show")
