"""Every command of ``governed-memory`` has help text and a section in docs/cli.md.

The group is walked recursively, so commands added by any module are covered.
"""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from governed_memory._cli import main

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _walk(group: click.Group, prefix: tuple[str, ...] = ()) -> list[tuple[str, ...]]:
    paths: list[tuple[str, ...]] = []
    for name, command in sorted(group.commands.items()):
        path = (*prefix, name)
        paths.append(path)
        if isinstance(command, click.Group):
            paths.extend(_walk(command, path))
    return paths


COMMANDS = _walk(main)


def _command(path: tuple[str, ...]) -> click.Command:
    command: click.Command = main
    for name in path:
        assert isinstance(command, click.Group)
        command = command.commands[name]
    return command


def test_the_memory_commands_are_registered() -> None:
    assert {("demo",), ("agents",), ("show",)} <= set(COMMANDS)


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_command_has_help_text(path: tuple[str, ...]) -> None:
    command = _command(path)
    assert (command.help or command.short_help or "").strip(), f"{' '.join(path)} has no help"
    result = CliRunner().invoke(main, [*path, "--help"], prog_name="governed-memory")
    assert result.exit_code == 0
    assert f"Usage: governed-memory {' '.join(path)}" in result.stdout


@pytest.mark.parametrize("path", COMMANDS, ids=" ".join)
def test_command_is_documented_in_docs_cli_md(path: tuple[str, ...]) -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert f"governed-memory {' '.join(path)}" in text, (
        f"docs/cli.md does not mention `governed-memory {' '.join(path)}`; add a section for it"
    )


@pytest.mark.parametrize("option", ["--workspace", "--policy"])
def test_global_options_are_documented(option: str) -> None:
    assert option in DOCS.read_text(encoding="utf-8")
    assert option in CliRunner().invoke(main, ["--help"]).stdout


def test_main_help_lists_every_top_level_command() -> None:
    out = CliRunner().invoke(main, ["--help"]).stdout
    for name in main.commands:
        assert name in out
