"""Export, erasure and rectification audit entries name who asked (``actor.hash``), as consent does.

The CLI wraps the sink with the operator (``ActorSink``); a caller of the
library (the console, serving many signed-in users from one Governance) passes
``actor=`` and the entry must record it itself.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import governed_memory as gm

ACTOR = "console:olivia"
SUBJECT = "C-1042"


@pytest.fixture
def gov(tmp_path: Path) -> gm.Governance:
    policy = tmp_path / "policy.toml"
    policy.write_text('[policy]\nid = "bank"\nversion = "1"\n\n[audit]\nenabled = true\n')
    workspace = tmp_path / "ws"
    workspace.mkdir()
    governance = gm.Governance(
        workspace=workspace, settings=gm.Settings(policy=policy, audit_key="5a" * 32)
    )
    conversation = gm.Conversation(
        name="A_conv", memory_md_path=gm.memory_md_path("A", workspace), governance=governance
    )
    conversation.add("Human", "C-1042 lives at Elm Street 4", subject_id=SUBJECT)
    return governance


def _actors(gov: gm.Governance, event: str) -> list[object]:
    trail = gov.audit
    assert isinstance(trail, gm.AuditTrail)
    return [
        e["attrs"].get("actor.hash")
        for e in trail.entries_for(subject_id=SUBJECT)
        if e["event"] == event
    ]


def _hash(gov: gm.Governance, actor: str) -> str:
    trail = gov.audit
    assert isinstance(trail, gm.AuditTrail)
    return trail.subject_hash(actor)


def test_an_export_entry_names_its_actor(gov: gm.Governance, tmp_path: Path) -> None:
    gm.export_subject(gov, SUBJECT, tmp_path / "out", actor=ACTOR)
    assert _actors(gov, "export") == [_hash(gov, ACTOR)]


def test_an_erasure_entry_names_its_actor(gov: gm.Governance) -> None:
    gm.erase(gov, subject=SUBJECT, reason="art. 17", actor=ACTOR)
    assert _actors(gov, "erase") == [_hash(gov, ACTOR)]


def test_an_erasure_refused_by_a_hold_names_its_actor(gov: gm.Governance) -> None:
    gm.HoldRegistry(gov.governance_dir, clock=gov.clock, sealing=gov.sealing).place(
        subject=SUBJECT, reason="case 7", actor="legal"
    )
    with pytest.raises(gm.ErasureBlockedError):
        gm.erase(gov, subject=SUBJECT, reason="art. 17", actor=ACTOR)
    assert _actors(gov, "erase") == [_hash(gov, ACTOR)]


def test_a_rectification_entry_names_its_actor(gov: gm.Governance, tmp_path: Path) -> None:
    export = gm.export_subject(gov, SUBJECT, tmp_path / "out", actor="setup")
    record = json.loads((Path(export.out_dir) / "export.json").read_text())["records"][0]
    gm.rectify(
        gov,
        subject=SUBJECT,
        record=record["record_id"],
        text="C-1042 lives at Oak Street 9",
        reason="moved",
        actor=ACTOR,
    )
    assert _actors(gov, "rectify") == [_hash(gov, ACTOR)]
