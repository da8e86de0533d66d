"""The command table (``_cli/_lazy.py``): commands load when they run, the table matches them."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from governed_memory._cli import main
from governed_memory._cli._lazy import COMMANDS

CLI_DIR = Path(__file__).parents[2] / "governed_memory" / "_cli"

# What a start-up that lists or versions must not pay for.
HEAVY = ("pydantic", "pydantic_settings", "rich", "cryptography", "opentelemetry", "litellm")


def _command_modules() -> list[str]:
    """Every module of the CLI that defines ``commands`` (the ones the table points into)."""
    names = []
    for path in sorted(CLI_DIR.glob("_*.py")):
        if path.stem == "__init__":
            continue
        if "\ncommands" in path.read_text(encoding="utf-8"):
            names.append(path.stem)
    return names


def test_the_table_lists_every_command_of_every_command_module_once() -> None:
    defined: dict[str, click.Command] = {}
    for name in _command_modules():
        module = importlib.import_module(f"governed_memory._cli.{name}")
        for command in module.commands:
            assert command.name not in defined, f"{command.name} defined twice"
            defined[str(command.name)] = command
    assert sorted(defined) == sorted(COMMANDS)
    for name, entry in COMMANDS.items():
        module = importlib.import_module(f"governed_memory._cli.{entry.module}")
        assert getattr(module, entry.attribute) is defined[name], name
        assert main.commands[name] is defined[name]


@pytest.mark.parametrize("limit", [12, 30, 45, 60, 200])
def test_every_summary_is_the_one_the_command_itself_would_show(limit: int) -> None:
    for name, entry in COMMANDS.items():
        module = importlib.import_module(f"governed_memory._cli.{entry.module}")
        real: click.Command = getattr(module, entry.attribute)
        stand_in = click.Command(name, help=entry.summary)
        assert stand_in.get_short_help_str(limit) == real.get_short_help_str(limit), name


def _modules_after(*argv: str) -> list[str]:
    """The modules a fresh interpreter has loaded after running ``governed-memory argv``."""
    script = (
        "import json, sys\n"
        "from governed_memory._cli import main\n"
        "try:\n"
        f"    main({list(argv)!r}, prog_name='governed-memory')\n"
        "except SystemExit:\n"
        "    pass\n"
        "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True, timeout=60
    )
    loaded: list[str] = json.loads(done.stderr.strip().splitlines()[-1])
    return loaded


@pytest.mark.parametrize("argv", [("--help",), ("--version",), ("-h",)])
def test_help_and_version_load_no_command_module_and_no_heavy_dependency(
    argv: tuple[str, ...],
) -> None:
    loaded = _modules_after(*argv)
    command_modules = {f"governed_memory._cli.{name}" for name in _command_modules()}
    assert not command_modules & set(loaded)
    heavy = [m for m in loaded if m.split(".")[0] in HEAVY]
    assert heavy == []


def test_a_command_loads_only_its_own_module() -> None:
    loaded = set(_modules_after("policy", "--help"))
    assert "governed_memory._cli._policy" in loaded
    others = {f"governed_memory._cli.{n}" for n in _command_modules()} - {
        "governed_memory._cli._policy"
    }
    assert not others & loaded


def test_help_lists_every_command_with_its_summary() -> None:
    shown = CliRunner().invoke(main, ["--help"], terminal_width=200)
    assert shown.exit_code == 0
    listed = " ".join(shown.output.split())
    for name, entry in COMMANDS.items():
        summary = click.Command(name, help=entry.summary).get_short_help_str(150)
        assert f"{name} {summary}" in listed


def test_version_is_the_installed_distributions() -> None:
    shown = CliRunner().invoke(main, ["--version"], prog_name="governed-memory")
    assert shown.exit_code == 0
    assert shown.output.strip() == f"governed-memory, version {version('governed-memory')}"


def test_a_misspelt_command_is_a_usage_error_suggesting_the_right_one() -> None:
    shown = CliRunner().invoke(main, ["agnets"])
    assert shown.exit_code == 2
    assert "No such command 'agnets'" in shown.output
    assert "agents" in shown.output
