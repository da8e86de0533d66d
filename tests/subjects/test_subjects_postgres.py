"""Subject requests on a PostgreSQL deployment under the regulated policy, against the test server.

Export, erasure, rectification and the request register run through the same
calls as on files; the registries, receipts and memory are rows of the
database, and nothing is written under the workspace folder.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from sealing_helpers import TEST_MASTER_KEY_B64

from governed_memory import Conversation, Governance, LocalSigningKey, memory_md_path
from governed_memory._policy import Settings
from governed_memory._records import ExportReceiptStore
from governed_memory._subjects import (
    close_request,
    erase,
    export_subject,
    open_request,
    rectify,
    verify_request,
)

ACTOR = "dpo@bank.example"


@pytest.fixture
def deployment_env(pg_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A regulated database deployment's environment (schema upgraded); WORKSPACE_DIR never made."""
    from governed_memory._postgres import Database, upgrade_schema

    db = Database(pg_url)
    try:
        upgrade_schema(db)
    finally:
        db.close()
    env = {
        "GOVERNED_MEMORY_DATABASE_URL": pg_url,
        "GOVERNED_MEMORY_POLICY": "regulated",
        "GOVERNED_MEMORY_AUDIT_KEY": "ab" * 32,
        "GOVERNED_MEMORY_MASTER_KEY": TEST_MASTER_KEY_B64,
        "GOVERNED_MEMORY_SIGNING_KEY": LocalSigningKey.generate().to_base64(),
        "WORKSPACE_DIR": str(tmp_path / "ws"),
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return env


@pytest.fixture
def gov(deployment_env: dict[str, str], tmp_path: Path) -> Iterator[Governance]:
    governance = Governance(settings=Settings())
    assert governance.storage.files is None  # really the database
    for subject in ("alice", "bob"):
        for purpose in ("persist", "summarize"):
            governance.grant(subject, purpose, actor=ACTOR)
    try:
        yield governance
    finally:
        assert not (tmp_path / "ws").exists()  # nothing of the deployment on the local disk
        governance.storage.close()


def _chat(gov: Governance, agent: str, subject: str, *texts: str) -> Conversation:
    conversation = Conversation(
        name=f"{agent}_conv", memory_md_path=memory_md_path(agent, gov.workspace), governance=gov
    )
    for text in texts:
        conversation.add("Human", text, subject_id=subject)
    return conversation


def _stored_text(gov: Governance) -> str:
    """Every memory and archive of every agent, read back through the stores (decrypted)."""
    parts = []
    backend = gov.memory_backend
    for name in backend.agents():
        store = backend.open(name, lambda: "")
        try:
            for memory in [store, *store.subject_stores()]:
                parts.append(memory.read_memory() or "")
                parts += [memory.read_archive(a) for a in memory.list_archives()]
        finally:
            store.close()
    return "\n".join(parts)


def test_export_writes_the_bundle_where_asked_and_its_receipt_in_the_database(
    gov: Governance, tmp_path: Path
) -> None:
    _chat(gov, "A", "alice", "alice opens account 4471")
    _chat(gov, "A", "bob", "bob asks about loans")
    out = tmp_path / "export"
    result = export_subject(gov, "alice", out, actor=ACTOR)
    document = json.loads((out / "export.json").read_text())
    assert [r["content"] for r in document["records"]] == ["alice opens account 4471"]
    assert "bob asks" not in (out / "export.md").read_text()
    assert isinstance(result.receipt, str) and "PostgreSQL" in result.receipt
    receipt = ExportReceiptStore(gov.records, sealing=gov.sealing).get(result.id)
    assert receipt is not None and receipt.actor == ACTOR and receipt.signature is not None
    assert {f.path for f in receipt.files} >= {"export.json", "report.md"}


def test_erasure_reaches_a_live_conversation_in_another_process(
    gov: Governance, deployment_env: dict[str, str], tmp_path: Path
) -> None:
    _chat(gov, "A", "bob", "bob keeps his savings plan")
    ready, go = tmp_path / "ready", tmp_path / "go"
    child = textwrap.dedent(
        f"""
        import pathlib, time
        from governed_memory import Conversation, Governance, memory_md_path
        from governed_memory._errors import ErasedDuringCompactionError
        gov = Governance()
        live = Conversation(name="A_live", memory_md_path=memory_md_path("A", gov.workspace),
                            governance=gov)
        live.add("Human", "alice secret 9911", subject_id="alice")
        pathlib.Path({str(ready)!r}).write_text("ok")
        while not pathlib.Path({str(go)!r}).exists():
            time.sleep(0.02)
        try:
            live.compact("[Compressed Memory Summary] alice secret 9911",
                         keep_other_subjects=True)
            print("COMPACTED")
        except ErasedDuringCompactionError:
            print("REFUSED")
        print("HISTORY", "alice secret" in live.return_history_as_string())
        """
    )
    env = {**os.environ, **deployment_env, "PYTHONPATH": str(Path(__file__).parents[2])}
    proc = subprocess.Popen(
        [sys.executable, "-c", child], env=env, cwd=tmp_path, stdout=subprocess.PIPE, text=True
    )
    try:
        for _ in range(1500):
            if ready.exists() or proc.poll() is not None:
                break
            import time

            time.sleep(0.02)
        assert ready.exists(), "the live conversation did not start"
        assert "alice secret 9911" in _stored_text(gov)
        receipt = erase(gov, subject="alice", reason="art. 17 request", actor=ACTOR)
        assert receipt.records == 1
        go.write_text("go")
        out, _ = proc.communicate(timeout=60)
    finally:
        proc.kill()
    assert proc.returncode == 0
    assert "REFUSED" in out and "HISTORY False" in out  # dropped before its next compaction
    text = _stored_text(gov)
    assert "alice secret" not in text and "bob keeps his savings plan" in text


def test_rectification_and_the_request_register_on_the_database(
    gov: Governance, tmp_path: Path
) -> None:
    _chat(gov, "A", "alice", "alice lives at Elm Street 4")
    request = open_request(
        gov, subject="alice", kind="rectification", received="2026-12-01", actor=ACTOR
    )
    verify_request(gov, request.id, by=ACTOR, method="id document")
    export = export_subject(gov, "alice", tmp_path / "x", actor=ACTOR)
    records = json.loads((Path(export.out_dir) / "export.json").read_text())["records"]
    receipt = rectify(
        gov,
        subject="alice",
        record=records[0]["record_id"],
        text="alice lives at Oak Street 9",
        reason="moved",
        actor=ACTOR,
    )
    closed = close_request(gov, request.id, actor=ACTOR, receipt=receipt.id)
    assert closed.closing is not None and closed.closing.receipt == receipt.id
    text = _stored_text(gov)
    assert "Oak Street 9" in text and "Elm Street" not in text
    # Read back by a second Governance, as another host would: the register is in the database.
    other = Governance(settings=Settings())
    try:
        from governed_memory._subjects import request_register

        again = request_register(other).get(request.id)
        assert again.closing is not None and again.closing.outcome == "answered"
    finally:
        other.storage.close()
