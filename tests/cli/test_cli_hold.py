"""``governed-memory hold place|release|list`` through the real entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from governed_memory._cli import main
from governed_memory._records._holds import HoldRegistry


def hold(workspace: Path, *args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, ["--workspace", str(workspace), "hold", *args])
    return result.exit_code, result.stdout, result.stderr


def test_place_list_release_round_trip(workspace: Path) -> None:
    code, out, _ = hold(
        workspace, "place", "--agent", "Quant", "--reason", "case 17", "--actor", "legal@bank"
    )
    assert code == 0 and "placed hold-" in out and "agent 'Quant'" in out
    code, out, _ = hold(workspace, "list")
    assert code == 0 and "Quant" in out and "case 17" in out and "legal@bank" in out
    code, out, _ = hold(workspace, "release", "--agent", "Quant", "--actor", "dpo@bank")
    assert code == 0 and "released hold-" in out and "dpo@bank" in out
    code, out, _ = hold(workspace, "list", "--json")
    assert json.loads(out) == []
    code, out, _ = hold(workspace, "list", "--all", "--json")
    (entry,) = json.loads(out)
    assert entry["active"] is False and entry["released_by"] == "dpo@bank"


def test_placed_hold_is_durable_and_seen_by_the_library(workspace: Path) -> None:
    code, out, _ = hold(
        workspace, "place", "--subject", "patient-7", "--reason", "litigation", "--json"
    )
    assert code == 0
    placed = json.loads(out)
    assert placed["subject"] == "patient-7" and placed["placed_by"].startswith("cli:")
    registry = HoldRegistry(workspace / ".governed_memory")
    assert registry.is_held(subject="patient-7")
    assert [h.id for h in registry.holds()] == [placed["id"]]


def test_reason_is_required_when_placing(workspace: Path) -> None:
    code, _, err = hold(workspace, "place", "--agent", "Quant")
    assert code == 2 and "--reason" in err
    assert not (workspace / ".governed_memory").exists()


@pytest.mark.parametrize(
    "args",
    [
        ["place", "--reason", "r"],
        ["place", "--agent", "A", "--subject", "s", "--reason", "r"],
        ["release"],
        ["release", "--agent", "A", "--subject", "s"],
    ],
)
def test_target_mistakes_are_usage_errors(workspace: Path, args: list[str]) -> None:
    code, _, err = hold(workspace, *args)
    assert code == 2
    assert "--agent" in err and "--subject" in err


def test_invalid_agent_name_fails_with_the_rule(workspace: Path) -> None:
    code, _, err = hold(workspace, "place", "--agent", "../etc", "--reason", "r")
    assert code == 1
    assert "path separator" in err


def test_releasing_an_unknown_hold_fails(workspace: Path) -> None:
    code, _, err = hold(workspace, "release", "--subject", "nobody")
    assert code == 1 and "no active hold with subject 'nobody'" in err


def test_release_needs_an_id_when_a_target_has_several_holds(workspace: Path) -> None:
    hold(workspace, "place", "--agent", "A", "--reason", "case 1")
    code, out, _ = hold(workspace, "place", "--agent", "A", "--reason", "case 2", "--json")
    second = json.loads(out)["id"]
    code, _, err = hold(workspace, "release", "--agent", "A")
    assert code == 1 and "2 active holds" in err and "pass the id" in err
    code, out, _ = hold(workspace, "release", "--id", second, "--json")
    assert code == 0 and json.loads(out)["id"] == second
    code, out, _ = hold(workspace, "list", "--json")
    assert [h["reason"] for h in json.loads(out)] == ["case 1"]


def test_held_agent_is_skipped_by_purge(workspace: Path, tmp_path: Path) -> None:
    archive = workspace / "agents" / "Quant" / "archive"
    archive.mkdir(parents=True)
    (archive / "history_2020-01-01_00-00-00.md").write_text("# Agent Memory\n")
    policy = tmp_path / "p.toml"
    policy.write_text('[retention]\narchives_max_age = "30d"\n')
    hold(workspace, "place", "--agent", "Quant", "--reason", "case")
    result = CliRunner().invoke(
        main, ["--workspace", str(workspace), "--policy", str(policy), "purge", "--json"]
    )
    report = json.loads(result.stdout)
    assert report["total_deleted"] == 0 and report["held"] == {"archives_max_age": 1}
    assert (archive / "history_2020-01-01_00-00-00.md").exists()
