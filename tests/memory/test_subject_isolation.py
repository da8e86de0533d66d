"""Subject isolation on a shared agent (issue 12, item 2): each customer sees only their own memory.

Under ``[memory] isolation = "subject"`` (the default of ``regulated`` and
``hipaa``) a Conversation for subject S preloads S's records and the agent's
subject-free ones, writes S's turns to S's own memory, and compacts only S's
memory into a summary whose lineage is S alone. Run over a plaintext and an
encrypted workspace.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from governed_memory import (
    ConfigurationError,
    Conversation,
    FixedClock,
    Governance,
    Policy,
    Settings,
    generate_master_key,
    memory_md_path,
    parse_memory,
)
from governed_memory._format import LINEAGE_KEY, PRELOAD_PREFIX, render_block, render_header
from governed_memory._memory import ContextCompressor
from governed_memory._stores import ENCRYPTED_MEMORY

IBAN = "alice's IBAN DE89370400440532013000"
BOB = "bob's card 4111 1111 1111 1111"


def _policy(encrypted: bool, consent: bool) -> Policy:
    return Policy.model_validate(
        {
            "policy": {"id": "isolated", "version": "1"},
            "consent": {
                "required_for": ["persist"] if consent else [],
                "on_missing": "memory_only",
            },
            "memory": {"isolation": "subject"},
            "encryption": {"enabled": encrypted},
        }
    )


@pytest.fixture(params=["plaintext", "encrypted"])
def gov(request: pytest.FixtureRequest, workspace: Path, tmp_path: Path) -> Governance:
    """Isolation under a consent policy (regulated-like): alice and bob consented."""
    return _governance(request.param == "encrypted", True, workspace, tmp_path)


@pytest.fixture(params=["plaintext", "encrypted"])
def open_gov(request: pytest.FixtureRequest, workspace: Path, tmp_path: Path) -> Governance:
    """Isolation without consent requirements (hipaa-like): subject-free records persist too."""
    return _governance(request.param == "encrypted", False, workspace, tmp_path)


def _governance(encrypted: bool, consent: bool, workspace: Path, tmp_path: Path) -> Governance:
    clock = FixedClock(dt.datetime(2026, 12, 1, 9, 0, 0))
    key = generate_master_key()
    settings = Settings(master_key=key, keyring_dir=tmp_path / "kr") if encrypted else Settings()
    g = Governance(
        workspace=workspace, policy=_policy(encrypted, consent), settings=settings, clock=clock
    )
    for subject in ("alice", "bob"):
        g.grant(subject, "persist", actor="dpo")
    return g


def teller(gov: Governance, subject: str | None) -> Conversation:
    return Conversation(
        name="teller",
        subject_id=subject,
        memory_md_path=memory_md_path("Teller", gov.workspace),
        governance=gov,
    )


def _bytes_under(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def test_two_customers_of_one_agent_never_see_each_others_records(gov: Governance) -> None:
    alice = teller(gov, "alice")
    alice.add("Human", IBAN)
    bob = teller(gov, "bob")
    assert IBAN not in bob.get_str()
    bob.add("Human", BOB)
    assert IBAN in teller(gov, "alice").get_str()
    assert BOB not in teller(gov, "alice").get_str()
    assert BOB in teller(gov, "bob").get_str()
    anonymous = teller(gov, None)  # a conversation of no one sees no one's records
    assert IBAN not in anonymous.get_str() and BOB not in anonymous.get_str()


def test_each_subject_has_a_folder_named_without_their_id(gov: Governance) -> None:
    teller(gov, "alice").add("Human", IBAN)
    folder = gov.workspace / "agents" / "Teller"
    (partition,) = (folder / "subjects").iterdir()
    assert "alice" not in partition.name and len(partition.name) == 32
    names = {p.name for p in partition.iterdir()}
    assert names & {"MEMORY.md", ENCRYPTED_MEMORY}
    if gov.policy.encryption.enabled:
        assert b"alice" not in _bytes_under(gov.workspace)


def test_an_unconsented_subject_leaves_no_folder(gov: Governance) -> None:
    carol = teller(gov, "carol")  # no consent: memory only
    carol.add("Human", "carol's secret")
    assert not (gov.workspace / "agents" / "Teller" / "subjects").exists()


def test_existing_shared_memory_is_split_on_first_open(open_gov: Governance) -> None:
    gov = open_gov
    path = memory_md_path("Teller", gov.workspace)
    store = gov.store_factory(path, lambda: render_header("teller", "2026-11-30T10:00:00"))
    store.append(render_block("System", "2026-11-30T10:00:01", "opening hours 9-17"))
    store.append(render_block("Human", "2026-11-30T10:00:02", IBAN, {"subject": "alice"}))
    store.append(render_block("Human", "2026-11-30T10:00:03", BOB, {"subject": "bob"}))
    store.close()
    bob = teller(gov, "bob")
    text = bob.get_str()
    assert "opening hours" in text and BOB in text and IBAN not in text
    own = gov.store_factory(path, lambda: "")
    assert [r.content for r in parse_memory(own.read_memory() or "").records] == [
        "opening hours 9-17"
    ]
    alice_store = own.subject_store("alice")
    assert [r.content for r in parse_memory(alice_store.read_memory() or "").records] == [IBAN]


def test_a_compaction_touches_only_the_subjects_own_memory(gov: Governance) -> None:
    teller(gov, "bob").add("Human", BOB)
    agent = gov.store_factory(memory_md_path("Teller", gov.workspace), lambda: "")
    bob_store = agent.subject_store("bob")
    assert isinstance(bob_store.source(), str)
    bob_before = _files(gov, "bob")
    alice = teller(gov, "alice")
    alice.add("Human", IBAN)
    alice.compact("alice asked about her account")
    assert _files(gov, "bob") == bob_before
    alice_store = agent.subject_store("alice")
    (summary,) = parse_memory(alice_store.read_memory() or "").records
    assert summary.meta.get(LINEAGE_KEY) == ["alice"]
    assert summary.subject_id == "alice"
    assert len(alice_store.list_archives()) == 1
    assert agent.list_archives() == []


def _files(gov: Governance, subject: str) -> dict[str, bytes]:
    agent = gov.store_factory(memory_md_path("Teller", gov.workspace), lambda: "")
    folder = gov.workspace / "agents" / "Teller" / agent.subject_store(subject).source()
    root = folder.parent
    return {str(p.relative_to(root)): p.read_bytes() for p in root.rglob("*") if p.is_file()}


def test_another_subjects_message_is_stored_in_their_memory_and_kept_out_of_the_summary(
    gov: Governance,
) -> None:
    alice = teller(gov, "alice")
    alice.add("Human", IBAN)
    alice.add("Human", BOB, subject_id="bob")  # bob joins alice's session
    assert BOB in teller(gov, "bob").get_str()
    assert BOB not in teller(gov, "alice").get_str()
    with pytest.raises(ConfigurationError, match="keep_other_subjects=True") as refused:
        alice.compact("a summary that may quote bob")
    assert "bob" not in str(refused.value)  # named by a hash, not the raw id
    assert gov.subject_ref("bob") in str(refused.value)
    assert BOB in alice.get_str()  # nothing changed
    text, turns = alice.compaction_transcript()
    assert IBAN in text and BOB not in text
    assert all(m.get("subject_id") != "bob" for m in turns)
    alice.compact("alice's account", keep_other_subjects=True)
    history = alice.conversation_history
    assert history[-1]["content"] == BOB  # bob's message stays, unsummarised
    assert history[-2][LINEAGE_KEY] == ["alice"]


def test_the_compressor_summarises_only_the_subjects_own_turns(gov: Governance) -> None:
    class Agent:
        agent_name = "Teller"
        model_name = "local/extractive"
        context_length = 1000

        def __init__(self, memory: Conversation) -> None:
            self.short_memory = memory

    alice = teller(gov, "alice")
    alice.add("Human", IBAN)
    alice.add("Human", BOB, subject_id="bob")
    summary = ContextCompressor(summarizer_model="local/extractive").compress(Agent(alice))
    assert summary is not None and "4111" not in summary
    agent = gov.store_factory(memory_md_path("Teller", gov.workspace), lambda: "")
    (record,) = parse_memory(agent.subject_store("alice").read_memory() or "").records
    assert record.meta.get(LINEAGE_KEY) == ["alice"]
    assert "4111" not in record.content
    assert alice.conversation_history[-1]["content"] == BOB


def test_the_agents_shared_records_are_kept_through_a_subjects_compaction(
    open_gov: Governance,
) -> None:
    gov = open_gov
    teller(gov, None).add("System", "branch closes at 17:00")  # a subject-free record
    path = memory_md_path("Teller", gov.workspace)
    store = gov.store_factory(path, lambda: "")
    alice = teller(gov, "alice")
    alice.add("Human", IBAN)
    assert "branch closes" in alice.get_str()
    _, turns = alice.compaction_transcript()
    assert all("branch closes" not in str(m["content"]) for m in turns)
    alice.compact("alice's account")
    assert "branch closes" in alice.get_str()  # in memory as on disk
    again = teller(gov, "alice")
    assert "branch closes" in again.get_str() and "alice's account" in again.get_str()
    assert [r.content for r in parse_memory(store.read_memory() or "").records] == [
        "branch closes at 17:00"
    ]


def test_a_record_holding_another_subject_is_never_preloaded(gov: Governance) -> None:
    agent = gov.store_factory(memory_md_path("Teller", gov.workspace), lambda: "")
    alice_store = agent.subject_store("alice")
    # A summary from before isolation: alice's, but derived from bob's words too.
    alice_store.append(
        render_block(
            "System",
            "2026-11-30T10:00:01",
            "alice and bob: " + BOB,
            {"subject": "alice", LINEAGE_KEY: ["alice", "bob"]},
        )
    )
    alice_store.append(render_block("Human", "2026-11-30T10:00:02", IBAN, {"subject": "alice"}))
    alice = teller(gov, "alice")
    assert IBAN in alice.get_str() and BOB not in alice.get_str()


def test_the_preload_bound_covers_both_memories(open_gov: Governance) -> None:
    gov = open_gov
    store = gov.store_factory(memory_md_path("Teller", gov.workspace), lambda: "")
    store.append(render_block("System", "2026-11-30T10:00:01", "old shared note " * 20))
    for i in range(5):
        teller(gov, "alice").add("Human", f"turn {i}")
    bound = 400
    alice = Conversation(
        name="teller",
        subject_id="alice",
        memory_md_path=memory_md_path("Teller", gov.workspace),
        governance=gov,
        preload_max_chars=bound,
    )
    contents = [str(m["content"]) for m in alice.conversation_history]
    preloads = [c for c in contents if c.startswith(PRELOAD_PREFIX)]
    assert preloads
    assert sum(len(c) - len(PRELOAD_PREFIX) for c in preloads) <= bound
    assert "turn 4" in alice.get_str()
    assert "old shared note" not in alice.get_str()  # the oldest went first


def test_agent_isolation_keeps_the_reference_behaviour(workspace: Path) -> None:
    policy = Policy.model_validate(
        {"policy": {"id": "shared", "version": "1"}, "memory": {"isolation": "agent"}}
    )
    gov = Governance(workspace=workspace, policy=policy, settings=Settings())
    teller(gov, "alice").add("Human", IBAN)
    assert IBAN in teller(gov, "bob").get_str()
    assert not (workspace / "agents" / "Teller" / "subjects").exists()
