"""``governed-memory isolate-subjects`` and the subject-memory views of ``agents`` and ``show``.

Through the real entry point, over an audited workspace, plaintext and encrypted.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from governed_memory import Conversation, Governance, Settings, memory_md_path, parse_memory
from governed_memory._audit import AuditKey, AuditLog
from governed_memory._base._workspace import GOVERNANCE_DIR
from governed_memory._crypto import generate_master_key

AUDIT_KEY = "ab" * 32
MASTER_KEY = generate_master_key()


def _policy(tmp_path: Path, encrypted: bool, isolation: str = "agent") -> Path:
    path = tmp_path / f"policy-{isolation}.toml"
    path.write_text(
        '[policy]\nid = "bank"\nversion = "4"\n\n[audit]\nenabled = true\n\n'
        f"[encryption]\nenabled = {'true' if encrypted else 'false'}\n\n"
        f'[memory]\nisolation = "{isolation}"\n'
    )
    return path


def _run(workspace: Path, policy: Path, *args: str) -> tuple[int, str, str]:
    from governed_memory._cli import main

    result = CliRunner().invoke(
        main,
        ["--workspace", str(workspace), "--policy", str(policy), *args],
        env={"GOVERNED_MEMORY_AUDIT_KEY": AUDIT_KEY, "GOVERNED_MEMORY_MASTER_KEY": MASTER_KEY},
        prog_name="governed-memory",
    )
    return result.exit_code, result.stdout, result.stderr


def _governance(workspace: Path, policy: Path) -> Governance:
    return Governance(
        workspace=workspace,
        settings=Settings(policy=policy, audit_key=AUDIT_KEY, master_key=MASTER_KEY),
    )


@pytest.fixture(params=[False, True], ids=["plaintext", "encrypted"])
def shared(request: pytest.FixtureRequest, workspace: Path, tmp_path: Path) -> Path:
    """Two agents whose shared memory holds alice's, bob's and subject-free records."""
    policy = _policy(tmp_path, encrypted=request.param)
    gov = _governance(workspace, policy)
    for subject in ("alice", "bob"):
        gov.grant(subject, "persist", actor="dpo")
    teller = Conversation(memory_md_path=memory_md_path("Teller", workspace), governance=gov)
    teller.add("Human", "alice's IBAN", subject_id="alice")
    teller.add("Human", "bob's IBAN", subject_id="bob")
    teller.add("Human", "alice again", subject_id="alice")
    teller.add("Teller", "opening hours are 9 to 5")
    clerk = Conversation(memory_md_path=memory_md_path("Clerk", workspace), governance=gov)
    clerk.add("Human", "bob at the desk", subject_id="bob")
    return policy


def _events(workspace: Path) -> list[tuple[str, dict[str, object]]]:
    log = AuditLog(workspace / GOVERNANCE_DIR / "audit", AuditKey.from_text(AUDIT_KEY))
    try:
        return [(e.event, dict(e.attrs)) for e in log.entries()]
    finally:
        log.close()


def _contents(workspace: Path, policy: Path, agent: str, subject: str | None) -> list[str]:
    gov = _governance(workspace, policy)
    store = gov.store_factory(workspace / "agents" / agent / "MEMORY.md", lambda: "")
    target = store if subject is None else store.subject_store(subject)
    try:
        return [r.content for r in parse_memory(target.read_memory() or "").records]
    finally:
        target.close()
        store.close()


def test_isolate_subjects_moves_each_agents_records_and_is_audited(
    workspace: Path, shared: Path
) -> None:
    code, out, err = _run(workspace, shared, "isolate-subjects")
    assert code == 0, err
    assert "4 record(s) moved to subject memories in 2 agent(s)" in out
    assert "Teller" in out and "Clerk" in out
    assert _contents(workspace, shared, "Teller", None) == ["opening hours are 9 to 5"]
    assert _contents(workspace, shared, "Teller", "alice") == ["alice's IBAN", "alice again"]
    assert _contents(workspace, shared, "Teller", "bob") == ["bob's IBAN"]
    assert _contents(workspace, shared, "Clerk", "bob") == ["bob at the desk"]
    isolated = [attrs for event, attrs in _events(workspace) if event == "memory.isolate"]
    assert sorted(a["moved"] for a in isolated) == [1, 3]  # type: ignore[type-var]
    assert all(a["outcome"] == "ok" and "agent.hash" in a for a in isolated)
    assert all("alice" not in json.dumps(a) for a in isolated)
    again = _run(workspace, shared, "isolate-subjects", "--json")
    assert again[0] == 0 and json.loads(again[1])["records"] == 0  # idempotent


def test_isolate_subjects_dry_run_counts_and_changes_nothing(workspace: Path, shared: Path) -> None:
    before = sorted(p for p in workspace.rglob("*"))
    code, out, err = _run(workspace, shared, "isolate-subjects", "--dry-run", "--json")
    assert code == 0, err
    assert json.loads(out)["agents"] == {"Clerk": 1, "Teller": 3}
    assert sorted(p for p in workspace.rglob("*")) == before


def test_isolate_subjects_for_one_agent(workspace: Path, shared: Path) -> None:
    code, out, err = _run(workspace, shared, "isolate-subjects", "--agent", "Clerk", "--json")
    assert code == 0, err
    assert json.loads(out)["agents"] == {"Clerk": 1}
    assert not (workspace / "agents" / "Teller" / "subjects").exists()
    code, _, err = _run(workspace, shared, "isolate-subjects", "--agent", "Ghost")
    assert code == 1 and "agent 'Ghost' has no memory" in err


def test_isolate_subjects_says_what_it_means_under_agent_isolation(
    workspace: Path, shared: Path, tmp_path: Path
) -> None:
    code, out, _ = _run(workspace, shared, "isolate-subjects", "--dry-run")
    assert code == 0 and "memory.isolation = 'agent'" in out
    encrypted = any(workspace.rglob("*.gmenc"))
    subject_policy = _policy(tmp_path, encrypted=encrypted, isolation="subject")
    code, out, _ = _run(workspace, subject_policy, "isolate-subjects", "--dry-run")
    assert code == 0 and "memory.isolation" not in out


def test_agents_counts_subject_memories_and_their_records(workspace: Path, shared: Path) -> None:
    assert _run(workspace, shared, "isolate-subjects")[0] == 0
    code, out, err = _run(workspace, shared, "agents", "--json")
    assert code == 0, err
    found = {a["name"]: a for a in json.loads(out)}
    assert (found["Teller"]["subject_memories"], found["Teller"]["messages"]) == (2, 4)
    assert (found["Clerk"]["subject_memories"], found["Clerk"]["messages"]) == (1, 1)
    code, out, _ = _run(workspace, shared, "agents")
    assert "subject memories" in out


def test_show_lists_subject_memories_labelled_with_their_path(
    workspace: Path, shared: Path
) -> None:
    assert _run(workspace, shared, "isolate-subjects")[0] == 0
    code, out, err = _run(workspace, shared, "show", "Teller")
    assert code == 0, err
    folders = sorted(p.name for p in (workspace / "agents" / "Teller" / "subjects").iterdir())
    for name in folders:
        assert f"agents/Teller/subjects/{name}/MEMORY.md" in out
    assert out.index("opening hours") < min(out.index("alice's IBAN"), out.index("bob's IBAN"))
    code, out, err = _run(workspace, shared, "show", "Teller", "--json")
    sources = {r["content"]: r["source"] for r in json.loads(out)["records"]}
    assert sources["opening hours are 9 to 5"].startswith("MEMORY.md")
    assert sources["alice's IBAN"].startswith("subjects/")


def test_show_subject_finds_that_subjects_memory_only(workspace: Path, shared: Path) -> None:
    code, out, err = _run(workspace, shared, "show", "Teller", "--subject", "alice", "--json")
    assert code == 0, err
    before = [r["content"] for r in json.loads(out)["records"]]
    assert before == ["alice's IBAN", "alice again"]  # still in the shared memory
    assert _run(workspace, shared, "isolate-subjects")[0] == 0
    code, out, err = _run(workspace, shared, "show", "Teller", "--subject", "alice", "--json")
    assert code == 0, err
    records = json.loads(out)["records"]
    assert [r["content"] for r in records] == ["alice's IBAN", "alice again"]
    assert all(r["source"].startswith("subjects/") for r in records)
    code, out, _ = _run(workspace, shared, "show", "Teller", "--subject", "carol", "--json")
    assert code == 0 and json.loads(out)["records"] == []
