"""Mistakes a new admin makes get a hint: a missing workspace, --yes, a misplaced global option."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from governed_memory._cli import main
from governed_memory._cli._boundary import CREATES_WORKSPACE, NO_WORKSPACE, walk

DOCS = Path(__file__).resolve().parents[2] / "docs" / "cli.md"


def _run(*args: str, stdin: str | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), input=stdin)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.stdout + result.stderr


def test_a_misspelt_workspace_is_an_error_saying_how_to_create_one(tmp_path: Path) -> None:
    missing = tmp_path / "wss"
    code, out = _run("--workspace", str(missing), "purge", "--dry-run")
    assert code == 1
    assert f"workspace {missing} does not exist" in out and "demo" in out
    assert not missing.exists()


@pytest.mark.parametrize(
    "args",
    [
        ("erasures", "list"),
        ("hold", "list"),
        ("consent", "status"),
        ("show", "A"),
        ("keys", "status"),
        ("scheduler", "status"),
        ("export", "--subject", "s", "--out", "out"),
    ],
    ids=" ".join,
)
def test_reading_commands_refuse_a_missing_workspace(tmp_path: Path, args: tuple[str, ...]) -> None:
    code, out = _run("--workspace", str(tmp_path / "nope"), *args)
    assert code == 1 and "does not exist" in out


def test_a_creating_command_makes_the_workspace(tmp_path: Path) -> None:
    fresh = tmp_path / "fresh"
    code, _ = _run("--workspace", str(fresh), "hold", "place", "--agent", "A", "--reason", "case 1")
    assert code == 0 and fresh.is_dir()


def test_the_exempt_commands_are_real_commands_and_listed_in_docs_cli_md() -> None:
    paths = {path for path, _ in walk(main)}
    text = DOCS.read_text(encoding="utf-8")
    for path in CREATES_WORKSPACE | NO_WORKSPACE:
        assert path in paths
        assert f"`{path}`" in text, f"docs/cli.md does not list `{path}` as exempt"


def test_erase_without_yes_and_no_terminal_says_to_pass_yes(workspace: Path) -> None:
    code, out = _run("--workspace", str(workspace), "erase", "--subject", "s", stdin="")
    assert code == 1
    assert "pass --yes" in out


@pytest.mark.parametrize("option", ["--policy", "--workspace"])
def test_a_global_option_after_the_command_says_it_goes_before(option: str) -> None:
    code, out = _run("purge", option, "x")
    assert code == 2
    assert f"{option} is a global option: put it before the command" in out
    assert f"governed-memory {option} VALUE purge" in out
