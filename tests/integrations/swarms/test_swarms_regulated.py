"""policies/regulated.toml: the swarms agent's memory is consented, encrypted, isolated, audited, erasable."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from swarms_helpers import CANARY, SWARMS_WARNINGS, all_bytes, consented, is_summary_request

from governed_memory import ConfigurationError, erase, export_subject
from governed_memory._cli import main

pytestmark = pytest.mark.filterwarnings(SWARMS_WARNINGS)


def test_an_agent_without_a_subject_is_refused_naming_the_policy_and_the_fix(
    regulated: Path, make_agent: Callable[..., Any]
) -> None:
    with pytest.raises(ConfigurationError) as caught:
        make_agent()
    message = str(caught.value)
    assert "'regulated'" in message and "consent.required_for" in message
    assert "memory.isolation = 'subject'" in message and "subject_id=" in message
    assert not (regulated / "agents").exists()


def test_no_plaintext_canary_anywhere_and_the_audit_log_verifies(
    regulated: Path, make_agent: Callable[..., Any], stub: Any
) -> None:
    stub.queue(f"Noted: {CANARY}.")
    agent = consented(make_agent(subject_id="cust-42"), "persist")
    agent.run(f"My {CANARY}, please remember it.")
    assert CANARY.encode() not in all_bytes(regulated)
    assert (regulated / "agents" / "Quant").exists()
    again = make_agent(subject_id="cust-42")  # decrypted on preload, for this subject
    assert CANARY in again.short_memory.get_str()
    assert CANARY not in make_agent(subject_id="cust-7").short_memory.get_str()
    result = CliRunner().invoke(main, ["audit", "verify"])
    assert result.exit_code == 0, result.output
    assert result.output.startswith("OK:")


def test_a_withdrawal_stops_the_next_write(
    regulated: Path, make_agent: Callable[..., Any], stub: Any
) -> None:
    stub.queue("first reply", "second reply")
    agent = consented(make_agent(subject_id="cust-42"), "persist")
    agent.run("before the withdrawal")
    agent.governance.withdraw("cust-42", "persist", actor="test")
    agent.run("after the withdrawal")
    assert "after the withdrawal" in agent.short_memory.get_str()  # kept in memory only
    agent.governance.grant("cust-42", "persist", actor="test")  # to read back what is stored
    stored = make_agent(subject_id="cust-42").short_memory.get_str()
    assert "before the withdrawal" in stored and "first reply" in stored
    assert "after the withdrawal" not in stored and "second reply" not in stored


def test_an_erasure_removes_the_subject_and_the_live_agent_drops_it(
    regulated: Path, make_agent: Callable[..., Any], stub: Any, tmp_path: Path
) -> None:
    stub.queue("stored", "the next answer")
    agent = consented(make_agent(subject_id="cust-42"), "persist")
    agent.run(f"My {CANARY}.")
    before = export_subject(agent.governance, "cust-42", tmp_path / "before")
    assert before.records == 2 and CANARY.encode() in all_bytes(before.out_dir)
    erase(agent.governance, subject="cust-42", reason="Art. 17 request")
    assert CANARY not in agent.short_memory.get_str(), "the live agent dropped it"
    agent.run("What do you know about me?")
    assert CANARY not in str(stub.requests[-1]["messages"]), "nor is it sent to the model"
    assert CANARY not in make_agent(subject_id="cust-42").short_memory.get_str()
    after = export_subject(agent.governance, "cust-42", tmp_path / "after")
    assert CANARY.encode() not in all_bytes(after.out_dir)
    assert after.records == 2  # the turns after the erasure


def test_compaction_without_summarize_consent_uses_the_local_summarizer(
    regulated: Path, make_agent: Callable[..., Any], stub: Any
) -> None:
    stub.responder = lambda body: "EXTERNAL SUMMARY" if is_summary_request(body) else "word " * 40
    agent = consented(make_agent(subject_id="cust-42", max_loops=2, context_length=80), "persist")
    agent.run(f"Compare three vector databases for {CANARY}.")
    assert not any(map(is_summary_request, stub.requests)), "the transcript never left"
    summary = agent.short_memory.conversation_history[1]
    assert summary["role"] == "user" and summary["content"].startswith(
        "[Compressed Memory Summary]"
    )
    assert "EXTERNAL SUMMARY" not in summary["content"]
    assert list((regulated / "agents" / "Quant").rglob("history_*"))  # archived (encrypted)
    assert CANARY.encode() not in all_bytes(regulated)


def test_compaction_with_summarize_consent_sends_swarms_call_with_the_subjects_transcript(
    regulated: Path, make_agent: Callable[..., Any], stub: Any
) -> None:
    stub.responder = lambda body: "EXTERNAL SUMMARY" if is_summary_request(body) else "ok"
    agent = consented(make_agent(subject_id="cust-42"), "persist", "summarize")
    for turn in ("one", "two", "three"):
        agent.short_memory.add("Human", f"turn {turn}")
    text, turns = agent.short_memory.compaction_transcript()
    assert agent._context_compressor.compress(agent) == "EXTERNAL SUMMARY"
    (request,) = [body for body in stub.requests if is_summary_request(body)]
    from swarms.agents.context_compressor import COMPRESSION_USER_TEMPLATE

    assert request["messages"][1]["content"] == COMPRESSION_USER_TEMPLATE.format(history=text)
    assert len(turns) == 3
    assert agent.short_memory.conversation_history[-1]["lineage"] == ["cust-42"]


def test_changing_the_subject_opens_that_subjects_memory(
    regulated: Path, make_agent: Callable[..., Any], stub: Any
) -> None:
    stub.queue("noted")
    agent = consented(make_agent(subject_id="cust-42"), "persist")
    agent.run(f"My {CANARY}.")
    agent.subject_id = "cust-7"
    assert CANARY not in agent.short_memory.get_str()
    assert agent.short_memory.subject_id == "cust-7"
    with pytest.raises(ConfigurationError, match="no subject_id"):
        agent.subject_id = None


def test_a_policy_refusing_external_summaries_skips_the_compaction(
    regulated: Path, make_agent: Callable[..., Any], stub: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOVERNED_MEMORY_SUMMARIZATION__EXTERNAL_ALLOWED", "false")
    monkeypatch.setenv("GOVERNED_MEMORY_SUMMARIZATION__ALLOWED_MODELS", '["local/*"]')
    monkeypatch.setenv("GOVERNED_MEMORY_SUMMARIZATION__FALLBACK", "skip")
    stub.responder = lambda body: "EXTERNAL SUMMARY" if is_summary_request(body) else "ok"
    agent = consented(make_agent(subject_id="cust-42"), "persist", "summarize")
    agent.short_memory.add("Human", "a turn")
    history = list(agent.short_memory.conversation_history)
    assert agent._context_compressor.compress(agent) is None
    assert agent.short_memory.conversation_history == history
    assert not any(map(is_summary_request, stub.requests))
    assert not list((regulated / "agents" / "Quant").rglob("history_*"))
