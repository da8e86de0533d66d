"""Summarizers: the offline extractive one, and litellm (mock_response and a 127.0.0.1 stub)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from llm_stub import StubLLM

from governed_memory import (
    ConfigurationError,
    ExtractiveSummarizer,
    LiteLLMSummarizer,
    ModelCallError,
    Summarizer,
    Transcript,
    counter_for,
)
from governed_memory._format._records import PRELOAD_PREFIX, render_block, render_header
from governed_memory._memory._summarizers import LOCAL_EXTRACTIVE, SUMMARY_PREFIX, summarizer_for
from governed_memory._policy._model import LOCAL_SUMMARIZER

COUNT = counter_for(None)

MIGRATION = [
    {
        "role": "Human",
        "content": "Plan the migration of the billing database to PostgreSQL 16 before 2026-12-15.",
    },
    {
        "role": "Agent",
        "content": "Sure! Happy to help. The current database is MySQL 5.7 with 2.3 TB of data.",
    },
    {"role": "Human", "content": "ok thanks"},
    {
        "role": "Agent",
        "content": "I ran the schema check. Error: table invoices has 3 columns with zero dates "
        "that PostgreSQL rejects. We decided to convert them to NULL.",
    },
    {
        "role": "Tool Executor",
        "content": "pg_dump returned: exit code 1, permission denied for schema audit",
    },
    {"role": "Human", "content": "Also Alice from finance must approve the cutover window."},
    {"role": "Agent", "content": "I will draft the cutover plan for Saturday 02:00 UTC."},
]


def summarize(messages: list[dict[str, Any]], max_tokens: int = 4000, **kwargs: Any) -> str:
    transcript = Transcript(text="", messages=messages, user_role="Human")
    return ExtractiveSummarizer(**kwargs).summarize(
        transcript, max_tokens=max_tokens, temperature=None
    )


# -- local/extractive ---------------------------------------------------------


def test_both_summarizers_satisfy_the_protocol() -> None:
    assert isinstance(ExtractiveSummarizer(), Summarizer)
    assert isinstance(LiteLLMSummarizer("gpt-4o-mini"), Summarizer)
    assert ExtractiveSummarizer.remote is False and LiteLLMSummarizer.remote is True
    assert LOCAL_EXTRACTIVE == LOCAL_SUMMARIZER == ExtractiveSummarizer.model


def test_keeps_task_facts_and_latest_turns_and_drops_filler() -> None:
    summary = summarize(MIGRATION)
    assert summary.startswith(
        "Original task (Human): Plan the migration of the billing database to PostgreSQL 16 "
        "before 2026-12-15."
    )
    assert "- Agent: The current database is MySQL 5.7 with 2.3 TB of data." in summary
    assert "permission denied for schema audit" in summary
    assert summary.endswith(
        "Latest turns:\n- Human: Also Alice from finance must approve the cutover window.\n"
        "- Agent: I will draft the cutover plan for Saturday 02:00 UTC."
    )
    assert "Sure!" not in summary and "ok thanks" not in summary


def test_a_tight_budget_keeps_the_most_informative_sentence() -> None:
    summary = summarize(MIGRATION, max_tokens=80)
    assert COUNT(summary) <= 80
    key_points = summary.split("Key points from earlier turns:\n")[1].split("\n\n")[0].splitlines()
    assert len(key_points) == 1
    assert "permission denied" in key_points[0] or "Error: table invoices" in key_points[0]
    assert "I ran the schema check." not in summary


def test_is_deterministic() -> None:
    assert summarize(MIGRATION, max_tokens=90) == summarize(list(MIGRATION), max_tokens=90)


@settings(max_examples=30, deadline=None)
@given(
    turns=st.lists(
        st.tuples(st.sampled_from(["Human", "Agent", "Tool Executor"]), st.text(max_size=300)),
        max_size=12,
    ),
    max_tokens=st.integers(min_value=1, max_value=400),
    keep_last=st.integers(min_value=0, max_value=3),
)
def test_never_exceeds_the_budget(
    turns: list[tuple[str, str]], max_tokens: int, keep_last: int
) -> None:
    messages = [{"role": role, "content": text} for role, text in turns]
    summary = summarize(messages, max_tokens=max_tokens, keep_last=keep_last)
    assert COUNT(summary) <= max_tokens


def test_nothing_to_summarize_gives_an_empty_summary() -> None:
    assert summarize([]) == ""
    assert (
        summarize([{"role": "Human", "content": "   "}, {"role": "Agent", "content": None}]) == ""
    )


def test_a_summary_of_a_summary_keeps_the_task_and_does_not_nest() -> None:
    first = summarize(MIGRATION)
    later = [
        {"role": "System", "content": SUMMARY_PREFIX + first},
        {"role": "Human", "content": "The cutover moved to Sunday 03:00 UTC."},
        {"role": "Agent", "content": "Updated the plan to Sunday 03:00 UTC."},
    ]
    second = summarize(later)
    assert second.count("Original task (Human): Plan the migration") == 1
    assert second.count("Key points from earlier turns:") == 1
    assert "- Agent: The current database is MySQL 5.7 with 2.3 TB of data." in second
    assert "- Human: Also Alice from finance must approve the cutover window." in second
    assert second.endswith("- Agent: Updated the plan to Sunday 03:00 UTC.")


def test_a_preloaded_memory_is_read_as_its_turns() -> None:
    memory = render_header("A_id_x_conversation", "2026-11-30T10:00:00") + "".join(
        render_block(m["role"], f"2026-11-30T10:00:0{i}", m["content"])
        for i, m in enumerate(MIGRATION)
    )
    summary = summarize(
        [
            {"role": "System", "content": PRELOAD_PREFIX + memory},
            {"role": "Human", "content": "Where were we?"},
        ]
    )
    assert summary.startswith("Original task (Human): Plan the migration")
    assert "Persistent Memory" not in summary and "# Agent Memory" not in summary
    assert "- Human: Where were we?" in summary


def test_works_from_the_history_string_alone() -> None:
    text = "\n\n".join(
        f"[2026-11-30T10:00:0{i}] {m['role']}: {m['content']}" for i, m in enumerate(MIGRATION)
    )
    summary = ExtractiveSummarizer().summarize(
        Transcript(text=text, user_role="Human"), max_tokens=4000, temperature=None
    )
    assert summary == summarize(MIGRATION)


@pytest.mark.parametrize("max_tokens", [0, -1, 1.5, True])
def test_bad_budget_is_refused(max_tokens: Any) -> None:
    with pytest.raises(ConfigurationError, match=repr(max_tokens).replace(".", r"\.")):
        summarize(MIGRATION, max_tokens=max_tokens)


def test_bad_keep_last_is_refused() -> None:
    with pytest.raises(ConfigurationError, match="keep_last=-1"):
        ExtractiveSummarizer(keep_last=-1)


# -- litellm ------------------------------------------------------------------


def transcript() -> Transcript:
    return Transcript(text="Human: the budget is 1000 EUR", messages=MIGRATION, user_role="Human")


def test_litellm_mock_response() -> None:
    summarizer = LiteLLMSummarizer(
        "gpt-4o-mini", completion_kwargs={"mock_response": "Budget: 1000 EUR."}
    )
    assert (
        summarizer.summarize(transcript(), max_tokens=100, temperature=0.2) == "Budget: 1000 EUR."
    )


def test_litellm_against_a_stub_server(stub_llm: StubLLM) -> None:
    stub_llm.queue("Budget: 1000 EUR.")
    summarizer = LiteLLMSummarizer("openai/house-model", api_base=stub_llm.url, api_key="sk-test")
    assert (
        summarizer.summarize(transcript(), max_tokens=123, temperature=0.3) == "Budget: 1000 EUR."
    )
    (body,) = stub_llm.requests
    assert body["model"] == "house-model"
    assert (body["max_tokens"], body["temperature"]) == (123, 0.3)
    assert body["messages"][1]["content"].count("Human: the budget is 1000 EUR") == 1
    assert "no-log" not in body and "turn_off_message_logging" not in body


def test_litellms_own_environment_configuration_is_honoured(
    stub_llm: StubLLM, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_BASE", stub_llm.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    assert (
        LiteLLMSummarizer("gpt-4o-mini").summarize(transcript(), max_tokens=10, temperature=None)
        == "stub reply"
    )
    assert len(stub_llm.requests) == 1


def test_a_failing_model_raises_model_call_error(stub_llm: StubLLM) -> None:
    stub_llm.responder = lambda body: {"status": 500}
    summarizer = LiteLLMSummarizer(
        "openai/house-model",
        api_base=stub_llm.url,
        api_key="sk-test",
        completion_kwargs={"max_retries": 0},
    )
    with pytest.raises(ModelCallError, match=r"'openai/house-model' at http://127\.0\.0\.1"):
        summarizer.summarize(transcript(), max_tokens=10, temperature=None)


def test_summarizer_for() -> None:
    assert isinstance(summarizer_for("local/extractive"), ExtractiveSummarizer)
    remote = summarizer_for("gpt-4o-mini", api_base="http://127.0.0.1:1/v1", api_key="k")
    assert isinstance(remote, LiteLLMSummarizer)
    assert (remote.model, remote.api_base, remote.api_key) == (
        "gpt-4o-mini",
        "http://127.0.0.1:1/v1",
        "k",
    )
    with pytest.raises(ConfigurationError, match="'local/abstractive'"):
        summarizer_for("local/abstractive")
    with pytest.raises(ConfigurationError, match="''"):
        LiteLLMSummarizer("")
