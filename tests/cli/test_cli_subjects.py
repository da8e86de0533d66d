"""``governed-memory export | erase | erasures ...`` through the real entry point."""

from __future__ import annotations

import datetime as dt
import json
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from subjects_helpers import conversation, governance, readable_text

from governed_memory import FixedClock
from governed_memory._base._workspace import GOVERNANCE_DIR
from governed_memory._records._holds import HoldRegistry


def run(workspace: Path, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    from governed_memory._cli import main

    result = CliRunner().invoke(main, ["--workspace", str(workspace), *args], input=stdin)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def populated(workspace: Path, clock: FixedClock) -> Path:
    gov = governance(workspace, clock)
    for agent in ("A", "B"):
        conv = conversation(gov, agent)
        conv.add("Human", f"alice private {agent}", subject_id="alice")
        conv.add("Human", f"bob private {agent}", subject_id="bob")
        conv.compact(f"[Compressed Memory Summary] {agent}")
        conv.add("Human", f"alice later {agent}", subject_id="alice")
    return workspace


def test_export_writes_the_folder_and_prints_digests(populated: Path, tmp_path: Path) -> None:
    code, out, _ = run(populated, "export", "--subject", "alice", "--out", str(tmp_path / "x"))
    assert code == 0, out
    assert "exported 4 records and 2 summaries (2 withheld)" in out
    assert "export.json" in out
    assert (tmp_path / "x" / "manifest.json").exists()


def test_export_json_output_for_scripts(populated: Path, tmp_path: Path) -> None:
    code, out, _ = run(populated, "export", "--agent", "A", "--out", str(tmp_path / "x"), "--json")
    assert code == 0
    data = json.loads(out)
    assert data["records"] == 3
    assert set(data["files"]) == {"export.json", "export.md", "report.md", "manifest.json"}
    assert data["id"] and data["receipt"].endswith(f"{data['id']}.json")


def test_export_into_a_non_empty_folder_fails_with_exit_1(populated: Path, tmp_path: Path) -> None:
    (tmp_path / "x").mkdir()
    (tmp_path / "x" / "other").write_text("x")
    code, _, err = run(populated, "export", "--subject", "alice", "--out", str(tmp_path / "x"))
    assert code == 1 and "is not empty" in err


@pytest.mark.parametrize("command", [["export", "--out", "x"], ["erase", "--yes"]])
def test_missing_scope_is_a_usage_error(populated: Path, command: list[str]) -> None:
    code, _, err = run(populated, *command)
    assert code == 2 and "--subject S, --agent A, or both" in err


def test_erase_prints_a_receipt_and_removes_the_data(populated: Path, clock: FixedClock) -> None:
    code, out, _ = run(populated, "erase", "--subject", "alice", "--reason", "DSR-17", "--yes")
    assert code == 0, out
    assert "4 records and 2 summaries removed from 4 files in 2 agents" in out
    assert "agents/A/MEMORY.md" in out
    text = readable_text(governance(populated, clock))
    assert "alice private" not in text and "alice later" not in text
    assert "bob private A" in text  # bob's own records stay
    assert "[Compressed Memory Summary] A" not in text  # the summary built from both went
    assert "[Summary removed for erasure on" in text


def test_erase_asks_for_confirmation(populated: Path, clock: FixedClock) -> None:
    code, _, _ = run(populated, "erase", "--subject", "alice", stdin="n\n")
    assert code == 1
    assert "alice private" in readable_text(governance(populated, clock))
    code, out, _ = run(populated, "erase", "--subject", "alice", stdin="y\n")
    assert code == 0 and "records" in out


def test_erase_json_receipt(populated: Path) -> None:
    code, out, _ = run(populated, "erase", "--agent", "B", "--yes", "--json")
    assert code == 0
    receipt = json.loads(out)
    assert receipt["scope"] == {"subject": None, "agent": "B"}
    assert receipt["totals"]["records"] == 3
    assert all(f["deleted"] for f in receipt["files"])


def test_erase_blocked_by_a_hold_exits_1_naming_the_hold(populated: Path) -> None:
    hold = HoldRegistry(populated / GOVERNANCE_DIR).place(
        subject="alice", reason="litigation 9", actor="legal@bank"
    )
    code, _, err = run(populated, "erase", "--subject", "alice", "--yes")
    assert code == 1
    assert hold.id in err and "legal@bank" in err and "litigation 9" in err


def test_grace_schedules_and_cancel_drops(populated: Path, clock: FixedClock) -> None:
    code, out, _ = run(populated, "erase", "--subject", "alice", "--grace", "30d", "--json")
    assert code == 0
    item = json.loads(out)
    code, out, _ = run(populated, "erasures", "list", "--json")
    assert [s["id"] for s in json.loads(out)["scheduled"]] == [item["id"]]
    code, out, _ = run(populated, "erasures", "run-due")
    assert code == 0 and "no erasure due" in out
    assert "alice private" in readable_text(governance(populated, clock))
    code, out, _ = run(populated, "erasures", "cancel", item["id"])
    assert code == 0 and "cancelled" in out
    code, _, err = run(populated, "erasures", "cancel", item["id"])
    assert code == 1 and "no scheduled erasure" in err


def test_list_and_show_completed_erasures(populated: Path) -> None:
    _, out, _ = run(populated, "erase", "--subject", "bob", "--yes", "--json")
    erasure_id = json.loads(out)["id"]
    code, out, _ = run(populated, "erasures", "list")
    assert code == 0 and "complete" in out and "subject 'bob'" in out
    code, out, _ = run(populated, "erasures", "show", erasure_id, "--json")
    assert code == 0 and json.loads(out)["id"] == erasure_id
    code, _, err = run(populated, "erasures", "show", "nope")
    assert code == 1 and "no completed erasure 'nope'" in err
    code, out, _ = run(populated, "erasures", "resume")
    assert code == 0 and "no interrupted erasure" in out


def test_every_subject_command_has_help_and_a_docs_page() -> None:
    from governed_memory._cli import _subjects

    docs = (Path(__file__).parents[2] / "docs" / "subject-requests.md").read_text()
    for command in _subjects.commands:
        assert command.help, command.name
        assert f"governed-memory {command.name}" in docs, command.name
        if isinstance(command, click.Group):
            for sub in command.commands.values():
                assert sub.help, sub.name
                assert f"governed-memory {command.name} {sub.name}" in docs, sub.name


def test_real_entry_point_runs_an_export(populated: Path, tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from governed_memory._cli import main; main()",
            "--workspace",
            str(populated),
            "export",
            "--subject",
            "bob",
            "--out",
            str(tmp_path / "bob"),
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["records"] == 2


def _damaged_workspace(workspace: Path) -> str:
    """A, B and C each hold one subject's record; A's memory file is damaged.

    Two erasures are due (scheduled long ago): alice everywhere (A cannot be
    read) and bob in B. Returns the id of alice's erasure.
    """
    from governed_memory._subjects import schedule_erasure

    gov = governance(workspace, FixedClock(dt.datetime(2020, 1, 1), tick=dt.timedelta(seconds=1)))
    for agent, subject in (("A", "alice"), ("B", "bob"), ("C", "alice")):
        conversation(gov, agent).add("Human", f"{subject} secret {agent}", subject_id=subject)
    item = schedule_erasure(gov, subject="alice", grace="1d")
    schedule_erasure(gov, subject="bob", agent="B", grace="1d")
    path = workspace / "agents" / "A" / "MEMORY.md"
    data = bytearray(path.read_bytes())
    data[len(data) // 2] = 0xFF  # never valid UTF-8
    path.write_bytes(bytes(data))
    return item.id


def test_run_due_runs_every_due_erasure_and_exits_1_listing_what_is_pending(
    workspace: Path,
) -> None:
    erasure_id = _damaged_workspace(workspace)
    code, out, err = run(workspace, "erasures", "run-due")
    assert code == 1
    assert f"pending: erasure {erasure_id} is pending" in err
    assert "agents/A/MEMORY.md" in err and "not valid UTF-8" in err
    assert "complete" in out  # bob's erasure in B ran all the same
    assert "bob secret" not in (workspace / "agents" / "B" / "MEMORY.md").read_text()
    assert "alice secret" not in (workspace / "agents" / "C" / "MEMORY.md").read_text()
    code, out, _ = run(workspace, "erasures", "run-due", "--json")
    assert code == 1
    [pending] = json.loads(out)["pending"]
    assert pending["id"] == erasure_id and pending["unfinished"][0]["agent"] == "A"


def test_show_of_a_pending_erasure_lists_agent_file_error_and_fix(workspace: Path) -> None:
    erasure_id = _damaged_workspace(workspace)
    run(workspace, "erasures", "run-due")
    code, out, _ = run(workspace, "erasures", "show", erasure_id)
    assert code == 0 and f"erasure {erasure_id} of subject 'alice' is pending" in out
    code, out, _ = run(workspace, "erasures", "show", erasure_id, "--json")
    [item] = json.loads(out)["unfinished"]
    assert item["file"] == "agents/A/MEMORY.md" and item["error"] == "StorageError"
    assert "run the request again" in item["fix"]


def test_erase_of_a_linked_agent_exits_1_and_leaves_no_tombstone(
    populated: Path, tmp_path: Path
) -> None:
    outside = tmp_path / "outside"
    (populated / "agents" / "B").rename(outside)
    (populated / "agents" / "Evil").symlink_to(outside, target_is_directory=True)
    code, _, err = run(populated, "erase", "--agent", "Evil", "--yes")
    assert code == 1 and "agents/Evil is a symbolic link" in err and "Traceback" not in err
    assert not list((populated / GOVERNANCE_DIR / "tombstones").glob("*.json"))
    assert (outside / "MEMORY.md").exists()
