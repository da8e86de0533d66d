"""A migration killed by SIGKILL at any step finishes, complete and verified, when run again.

The child process runs the real migration and kills itself (SIGKILL, no clean-up)
right after a chosen step; the parent runs the same migration again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from migrate_helpers import build_workspace, database, files, sibling, tree

from governed_memory._migrate import MARKER, migrate_storage
from governed_memory._postgres import Database, upgrade_schema

_CHILD = """
import os, signal, sys
sys.path[:0] = sys.argv[4].split(os.pathsep)
from migrate_helpers import database, files, sibling
from governed_memory import FixedClock, Governance
from governed_memory._migrate import migrate_storage
from governed_memory._postgres import Database
from migrate_helpers import CLOCK, policy
workspace, url, step = sys.argv[1], sys.argv[2], sys.argv[3]
gov = Governance(workspace=workspace, policy=policy(), clock=FixedClock(CLOCK))
def progress(what, count):
    if what == step:
        os.kill(os.getpid(), signal.SIGKILL)
migrate_storage(files(gov.workspace, gov, "plaintext"), database(Database(url), gov, "plaintext"),
                progress=progress)
"""


@pytest.mark.parametrize("step", ["copied documents", "copied memories"])
def test_a_killed_migration_resumes_to_a_complete_verified_copy(
    tmp_path: Path, pg_url: str, step: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    gov = build_workspace(tmp_path / "ws", "plaintext", monkeypatch)
    db = Database(pg_url)
    upgrade_schema(db)
    tests = Path(__file__).parents[1]
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            _CHILD,
            str(tmp_path / "ws"),
            pg_url,
            step,
            os.pathsep.join([str(tests / "migrate"), str(tests)]),
        ],
        capture_output=True,
        env={**os.environ},
    )
    assert child.returncode == -9, child.stderr.decode()
    try:
        there = database(db, gov, "plaintext")
        marker = json.loads(there.place.read_document(MARKER, None)[1] or b"{}")
        assert marker["state"] == "copying"
        report = migrate_storage(files(tmp_path / "ws", gov, "plaintext"), there)
        assert report.verified["memories"] == 2 and report.verified["archives"] == 2
        assert json.loads(there.place.read_document(MARKER, None)[1] or b"{}")["state"] == "done"
        back_gov = sibling(tmp_path / "back", gov)
        migrate_storage(there, files(tmp_path / "back", back_gov, "plaintext"))
        assert tree(tmp_path / "back", kind="plaintext") == tree(tmp_path / "ws", kind="plaintext")
    finally:
        db.close()
