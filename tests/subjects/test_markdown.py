"""export.md's Audit entries table shows the fields the recorded entries have."""

from __future__ import annotations

import json
from pathlib import Path

from subjects_helpers import conversation

from governed_memory import FixedClock, Governance, Settings
from governed_memory._policy._model import Policy
from governed_memory._subjects import export_subject


def test_every_audit_row_of_export_md_has_seq_time_event_and_outcome(
    workspace: Path, clock: FixedClock, tmp_path: Path
) -> None:
    policy = Policy.model_validate({"audit": {"enabled": True}})
    gov = Governance(
        workspace=workspace, policy=policy, clock=clock, settings=Settings(audit_key="ab" * 32)
    )
    conv = conversation(gov, "A")
    conv.add("User", "hello", subject_id="bob")
    export_subject(gov, "bob", tmp_path / "out")
    entries = json.loads((tmp_path / "out" / "export.json").read_text())["audit"]
    assert entries
    text = (tmp_path / "out" / "export.md").read_text()
    section = text.split("## Audit entries\n", 1)[1]
    table = [line for line in section.splitlines() if line.startswith("|")]
    assert table[0] == "| seq | time (UTC) | event | outcome |"
    rows = table[2:]
    assert len(rows) == len(entries)
    for row, entry in zip(rows, entries, strict=True):
        cells = [cell.strip() for cell in row.strip("|").split("|")]
        assert cells == [str(entry["seq"]), entry["ts"], entry["event"], entry["attrs"]["outcome"]]
