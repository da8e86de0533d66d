"""``governed-memory purge`` through the real entry point."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from governed_memory import Conversation, FixedClock
from governed_memory._cli import main

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)
DAY = dt.timedelta(days=1)


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def policy_file(tmp_path: Path) -> Path:
    path = tmp_path / "retention.toml"
    path.write_text('[policy]\nid = "bank"\nversion = "3"\n[retention]\narchives_max_age = "30d"\n')
    return path


@pytest.fixture
def populated(workspace: Path) -> Path:
    """Two agents, each with archives named T0, T0+1d, T0+2d."""
    for name in ("alpha", "beta"):
        clock = FixedClock(T0, tick=dt.timedelta(milliseconds=1))
        conv = Conversation(
            name=name, memory_md_path=workspace / "agents" / name / "MEMORY.md", clock=clock
        )
        for day in range(3):
            conv.add("User", f"{name} day {day}", subject_id=f"{name}-subject")
            conv.compact("summary")
            clock.advance(DAY)
    return workspace


def archives(workspace: Path) -> list[str]:
    return sorted(p.name for p in workspace.glob("agents/*/archive/history_*"))


def cli(workspace: Path, policy: Path, *args: str) -> tuple[int, str, str]:
    return run("--workspace", str(workspace), "--policy", str(policy), *args)


def test_dry_run_shows_the_plan_and_deletes_nothing(populated: Path, policy_file: Path) -> None:
    before = archives(populated)
    code, out, _ = cli(populated, policy_file, "purge", "--dry-run", "--as-of", "2026-01-31T13:00")
    assert code == 0
    assert "dry run, nothing deleted" in out
    assert out.count("archives_max_age") >= 2  # plan rows and the report row
    assert "history_2026-01-01_12-00-00" in out
    assert "would delete" in out and "policy bank v3" in out
    assert archives(populated) == before
    assert not (populated / ".governed_memory").exists()


def test_dry_run_json_lists_every_item(populated: Path, policy_file: Path) -> None:
    code, out, _ = cli(
        populated, policy_file, "purge", "--dry-run", "--as-of", "2026-01-31T13:00", "--json"
    )
    assert code == 0
    data = json.loads(out)
    assert data["dry_run"] is True and data["total_deleted"] == 2
    assert {i["agent"] for i in data["items"]} == {"alpha", "beta"}
    assert all(i["rule"] == "archives_max_age" and i["held_by"] == [] for i in data["items"])
    assert data["as_of"] == "2026-01-31T13:00:00"


def test_as_of_then_apply_then_nothing_more(populated: Path, policy_file: Path) -> None:
    code, out, _ = cli(populated, policy_file, "purge", "--as-of", "2026-03-01", "--json")
    assert code == 0
    report = json.loads(out)
    assert report["deleted"] == {"archives_max_age": 6} and report["bytes_freed"] > 0
    assert archives(populated) == []
    code, out, _ = cli(populated, policy_file, "purge", "--as-of", "2026-03-01", "--json")
    assert json.loads(out)["total_deleted"] == 0


def test_report_table_counts_rules_bytes_and_held(populated: Path, policy_file: Path) -> None:
    assert (
        cli(populated, policy_file, "hold", "place", "--agent", "beta", "--reason", "case 9")[0]
        == 0
    )
    code, out, _ = cli(populated, policy_file, "purge", "--as-of", "2026-03-01")
    assert code == 0
    assert "deleted" in out and "held (skipped)" in out
    row = next(line for line in out.splitlines() if "archives_max_age" in line)
    assert [c.strip() for c in row.strip("│ ").split("│")] == ["archives_max_age", "3", "3"]
    assert "bytes freed:" in out and "purge id:" in out
    assert len(archives(populated)) == 3


def test_default_policy_purges_nothing(populated: Path) -> None:
    before = archives(populated)
    # Looking ahead needs --dry-run (a real purge cannot be dated into the future).
    code, out, _ = run(
        "--workspace", str(populated), "purge", "--dry-run", "--as-of", "2099-01-01", "--json"
    )
    assert code == 0 and json.loads(out)["total_deleted"] == 0
    code, out, _ = run("--workspace", str(populated), "purge", "--json")
    assert code == 0 and json.loads(out)["total_deleted"] == 0
    assert archives(populated) == before


@pytest.mark.parametrize("value", ["yesterday", "2026-13-01", "01/02/2026"])
def test_bad_as_of_is_a_usage_error(populated: Path, policy_file: Path, value: str) -> None:
    code, _, err = cli(populated, policy_file, "purge", "--as-of", value)
    assert code == 2
    assert "ISO 8601" in err and value in err


def test_as_of_with_an_offset_is_converted_to_local_time(
    populated: Path, policy_file: Path
) -> None:
    code, out, _ = cli(
        populated,
        policy_file,
        "purge",
        "--dry-run",
        "--json",
        "--as-of",
        "2026-03-01T00:00:00+00:00",
    )
    expected = dt.datetime(2026, 3, 1, tzinfo=dt.UTC).astimezone().replace(tzinfo=None)
    assert code == 0 and json.loads(out)["as_of"] == expected.isoformat()


def test_a_purge_that_cannot_delete_exits_1(
    populated: Path, policy_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real_unlink = os.unlink

    def refusing(path: str, *args: object, dir_fd: int | None = None, **kwargs: object) -> None:
        folder = os.readlink(f"/proc/self/fd/{dir_fd}") if dir_fd is not None else ""
        if "alpha/archive" in os.path.join(folder, str(path)):
            raise PermissionError(13, "Permission denied", str(path))
        real_unlink(path, *args, dir_fd=dir_fd, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(os, "unlink", refusing)
    code, out, err = cli(populated, policy_file, "purge", "--as-of", "2026-03-01")
    monkeypatch.undo()
    assert code == 1
    assert "3 artefact(s) could not be deleted" in err
    assert "run `governed-memory purge` again" in err
    assert "failed: 3" in out  # the report is printed before the error
    assert [n for n in archives(populated)] == sorted(
        p.name for p in (populated / "agents" / "alpha" / "archive").iterdir()
    )
    # Once the cause is fixed, the next purge deletes them.
    code, out, _ = cli(populated, policy_file, "purge", "--as-of", "2026-03-01", "--json")
    assert code == 0 and json.loads(out)["total_deleted"] == 3 and archives(populated) == []


def test_purge_runs_through_the_installed_script(populated: Path, policy_file: Path) -> None:
    script = Path(sys.executable).with_name("governed-memory")
    proc = subprocess.run(
        [
            str(script),
            "--workspace",
            str(populated),
            "--policy",
            str(policy_file),
            "purge",
            "--as-of",
            "2026-03-01",
            "--json",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["total_deleted"] == 6


# -- floors and a moved clock (issue 12) ---------------------------------------


def test_a_real_purge_as_of_the_future_is_refused_in_one_line(
    populated: Path, policy_file: Path
) -> None:
    before = archives(populated)
    code, out, err = cli(populated, policy_file, "purge", "--as-of", "2040-01-01")
    assert code == 1 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith("error: purge as of 2040-01-01 00:00:00 refused")
    assert "later than now" in err and "--dry-run" in err
    assert archives(populated) == before


def test_a_dry_run_may_look_into_the_future(populated: Path, policy_file: Path) -> None:
    code, out, _ = cli(populated, policy_file, "purge", "--dry-run", "--as-of", "2040-01-01")
    assert code == 0 and "would delete" in out


def test_a_real_purge_as_of_now_or_the_past_runs(populated: Path, policy_file: Path) -> None:
    now = dt.datetime.now().replace(microsecond=0)
    code, out, _ = cli(populated, policy_file, "purge", "--as-of", now.isoformat(), "--json")
    assert code == 0 and json.loads(out)["total_deleted"] == 6
