"""Agent: runs against a stub model, compresses past the threshold, resumes from MEMORY.md."""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import Any, Literal

import pytest
from llm_stub import StubLLM

from governed_memory import (
    Agent,
    ConfigurationError,
    ContextCompressor,
    InvalidAgentNameError,
    ModelCallError,
    parse_memory,
)
from governed_memory._format._records import PRELOAD_PREFIX
from governed_memory._memory._compressor import SUMMARY_PREFIX
from governed_memory._memory._summarizers import COMPRESSION_SYSTEM_PROMPT


def make(stub: StubLLM, workspace: Path, name: str = "Ada", **kwargs: Any) -> Agent:
    kwargs.setdefault("model_name", "openai/house-model")
    return Agent(name, api_base=stub.url, api_key="sk-test", workspace_dir=workspace, **kwargs)


class SpyCompressor:
    """Counts the compression checks and the model calls they precede."""

    def __init__(self, stub: StubLLM) -> None:
        self.stub = stub
        self.requests_seen_at_check: list[int] = []

    def maybe_compress(self, agent: Any) -> None:
        self.requests_seen_at_check.append(len(self.stub.requests))


def add(a: int, b: int) -> int:
    """Add two whole numbers.

    Args:
        a: the first number.
        b: the second number.
    """
    return a + b


# -- a run ---------------------------------------------------------------------


def test_run_records_task_and_reply_and_returns_the_reply(
    stub_llm: StubLLM, workspace: Path
) -> None:
    stub_llm.queue("Hello, Grace.")
    agent = make(stub_llm, workspace, system_prompt="You are terse.", rules="Answer in English.")
    assert agent.run("Hi, I am Grace.") == "Hello, Grace."

    (body,) = stub_llm.requests
    assert body["model"] == "house-model"
    assert body["messages"][0] == {"role": "system", "content": "You are terse."}
    history = agent.short_memory.return_history_as_string()
    assert body["messages"][1]["content"] == history.rsplit("\n\n", 1)[0]  # before the reply
    roles = [m["role"] for m in agent.short_memory.conversation_history]
    assert roles == ["System", "Human", "Human", "Ada"]

    path = workspace / "agents" / "Ada" / "MEMORY.md"
    assert agent.memory_md_path == path
    records = parse_memory(path.read_text()).records
    assert [(r.role, r.content) for r in records] == [
        ("Human", "Hi, I am Grace."),
        ("Ada", "Hello, Grace."),
    ]
    assert "You are terse." not in path.read_text() and "Answer in English." not in path.read_text()


def test_run_through_litellm_mock_response(workspace: Path) -> None:
    agent = Agent(
        "Mock",
        model_name="gpt-4o-mini",
        workspace_dir=workspace,
        llm_args={"mock_response": "mocked"},
    )
    assert agent.run("anything") == "mocked"
    assert agent.short_memory.conversation_history[-1] == {
        "role": "Mock",
        "content": "mocked",
        "timestamp": agent.short_memory.conversation_history[-1]["timestamp"],
    }


def test_litellms_environment_configuration_is_honoured(
    stub_llm: StubLLM, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_BASE", stub_llm.url)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-env")
    agent = Agent("Env", model_name="gpt-4o-mini", workspace_dir=workspace)
    assert agent.run("hi") == "stub reply"


def test_conversation_name_and_header(stub_llm: StubLLM, workspace: Path) -> None:
    agent = make(stub_llm, workspace)
    assert re.fullmatch(r"Ada_id_[0-9a-f]{32}_conversation", agent.short_memory.name)
    header = (workspace / "agents" / "Ada" / "MEMORY.md").read_text()
    assert f"**Conversation:** {agent.short_memory.name}\n" in header


def test_restart_resumes_from_memory(stub_llm: StubLLM, workspace: Path) -> None:
    stub_llm.queue("Noted: teal.")
    make(stub_llm, workspace).run("My favourite colour is teal.")

    again = make(stub_llm, workspace)  # a new process, the next day
    preload = again.short_memory.conversation_history[-1]
    assert preload["role"] == "System" and preload["content"].startswith(PRELOAD_PREFIX)
    assert "My favourite colour is teal." in preload["content"]

    stub_llm.queue("Teal.")
    assert again.run("What is my favourite colour?") == "Teal."
    sent = stub_llm.requests[-1]["messages"][-1]["content"]
    assert "My favourite colour is teal." in sent and "Noted: teal." in sent


def test_memory_path_override_and_no_persistence(stub_llm: StubLLM, tmp_path: Path) -> None:
    custom = tmp_path / "elsewhere" / "MEMORY.md"
    make(stub_llm, tmp_path / "ws", memory_md_path=custom).run("hi")
    assert "hi" in custom.read_text()
    assert not (tmp_path / "ws").exists()

    ephemeral = make(stub_llm, tmp_path / "ws2", persistent_memory=False)
    ephemeral.run("hi")
    assert ephemeral.memory_md_path is None
    assert not (tmp_path / "ws2").exists()


# -- context window --------------------------------------------------------------


def test_context_length_from_litellms_model_table(workspace: Path) -> None:
    assert Agent("A", model_name="gpt-4o-mini", workspace_dir=workspace).context_length == 128000


def test_context_length_of_an_unknown_model_is_16000(workspace: Path) -> None:
    assert (
        Agent("A", model_name="openai/house-model", workspace_dir=workspace).context_length == 16000
    )


def test_compresses_when_it_crosses_the_threshold(stub_llm: StubLLM, workspace: Path) -> None:
    """Summaries come from the agent's own model (at the stub), as the reference does."""
    long_reply = (
        "The quarterly figures for region {n} show revenue of {n}000 EUR and costs of {n}00 EUR. "
        * 4
    )

    def respond(body: dict[str, Any]) -> str:
        if body["messages"][0]["content"] == COMPRESSION_SYSTEM_PROMPT:
            return "Reviewed regions 1-3: revenue 1000-3000 EUR."
        return long_reply.format(n=len(stub_llm.requests))

    stub_llm.responder = respond
    agent = make(stub_llm, workspace, context_length=400, max_loops=6)
    agent.run("Review the quarterly figures, region by region.")

    summary_requests = [
        i
        for i, r in enumerate(stub_llm.requests)
        if r["messages"][0]["content"] == COMPRESSION_SYSTEM_PROMPT
    ]
    assert summary_requests, "no compression happened"
    after = stub_llm.requests[summary_requests[0] + 1]["messages"][-1]["content"]
    assert SUMMARY_PREFIX + "Reviewed regions 1-3" in after
    assert "Review the quarterly figures, region by region." not in after
    assert list((workspace / "agents" / "Ada" / "archive").iterdir())
    records = parse_memory((workspace / "agents" / "Ada" / "MEMORY.md").read_text()).records
    assert records[0].role == "System" and records[0].content.startswith(SUMMARY_PREFIX)
    assert agent.short_memory.token_count == agent.short_memory.full_token_count()


def test_compresses_offline_with_the_local_summarizer(stub_llm: StubLLM, workspace: Path) -> None:
    stub_llm.responder = lambda body: "Region totals: revenue 4000 EUR, costs 900 EUR. " * 8
    agent = make(
        stub_llm, workspace, context_length=300, max_loops=5, summarizer_model="local/extractive"
    )
    agent.run("Summarize the regional totals for Falcon.")
    assert all(r["messages"][0]["content"] != COMPRESSION_SYSTEM_PROMPT for r in stub_llm.requests)
    texts = [r["messages"][-1]["content"] for r in stub_llm.requests]
    compressed = [t for t in texts if SUMMARY_PREFIX in t]
    assert compressed
    assert "Original task (Human): Summarize the regional totals for Falcon." in compressed[-1]


@pytest.mark.parametrize("max_loops", [1, 3])
def test_compression_check_precedes_every_model_call_with_integer_loops(
    stub_llm: StubLLM, workspace: Path, max_loops: int
) -> None:
    agent = make(stub_llm, workspace, max_loops=max_loops)
    spy = SpyCompressor(stub_llm)
    agent._context_compressor = spy  # type: ignore[assignment]
    agent.run("go")
    assert spy.requests_seen_at_check == list(range(max_loops))


def test_compression_check_precedes_every_model_call_in_auto_mode(
    stub_llm: StubLLM, workspace: Path
) -> None:
    stub_llm.queue(
        {"tool_calls": [("add", {"a": 1, "b": 2})]},
        {"tool_calls": [("add", {"a": 3, "b": 4})]},
        "Done: 3 and 7.",
    )
    agent = make(stub_llm, workspace, max_loops="auto", tools=[add])
    spy = SpyCompressor(stub_llm)
    agent._context_compressor = spy  # type: ignore[assignment]
    assert agent.run("add things") == "Done: 3 and 7."
    assert spy.requests_seen_at_check == [0, 1, 2]


def test_context_compression_false_has_no_compressor(stub_llm: StubLLM, workspace: Path) -> None:
    agent = make(stub_llm, workspace, context_compression=False, context_length=10)
    assert agent._context_compressor is None
    agent.run("a long enough task to be over ten tokens, surely, by now")
    assert all(SUMMARY_PREFIX not in m["content"] for m in agent.short_memory.conversation_history)


def test_default_compressor_is_the_references(stub_llm: StubLLM, workspace: Path) -> None:
    compressor = make(stub_llm, workspace)._context_compressor
    assert isinstance(compressor, ContextCompressor)
    assert compressor.threshold == 0.9 and compressor.summarizer_model is None


# -- tools and loop modes ----------------------------------------------------------


def test_tool_calls_are_run_and_recorded_as_tool_executor(
    stub_llm: StubLLM, workspace: Path
) -> None:
    stub_llm.queue({"tool_calls": [("add", {"a": 2, "b": 3})]}, "The sum is 5.")
    agent = make(stub_llm, workspace, max_loops="auto", tools=[add])
    assert agent.run("What is 2 + 3?") == "The sum is 5."

    tools = stub_llm.requests[0]["tools"]
    assert tools[0]["function"]["name"] == "add"
    assert tools[0]["function"]["parameters"]["properties"]["a"] == {
        "type": "integer",
        "description": "the first number.",
    }
    history = agent.short_memory.conversation_history
    assert [m["role"] for m in history] == ["Human", "Ada", "Tool Executor", "Ada"]
    assert history[1]["content"] == '[tool call] add({"a": 2, "b": 3})'
    assert history[2]["content"] == "add returned: 5"
    assert "Tool Executor: add returned: 5" in stub_llm.requests[1]["messages"][-1]["content"]


def test_a_failing_tool_is_reported_to_the_model(stub_llm: StubLLM, workspace: Path) -> None:
    def explode(reason: str) -> str:
        """Always fails."""
        raise RuntimeError(reason)

    stub_llm.queue(
        {"tool_calls": [("explode", {"reason": "disk full"}), ("missing", {})]}, "Gave up."
    )
    agent = make(stub_llm, workspace, max_loops="auto", tools=[explode])
    assert agent.run("try") == "Gave up."
    outputs = [
        m["content"]
        for m in agent.short_memory.conversation_history
        if m["role"] == "Tool Executor"
    ]
    assert outputs[0] == "Error: explode raised RuntimeError: disk full"
    assert outputs[1].startswith("Error: there is no tool named 'missing'")


def test_auto_mode_stops_at_its_cap(
    stub_llm: StubLLM, workspace: Path, caplog: pytest.LogCaptureFixture
) -> None:
    stub_llm.responder = lambda body: {"tool_calls": [("add", {"a": 1, "b": 1})]}
    agent = make(stub_llm, workspace, max_loops="auto", tools=[add], auto_max_loops=4)
    with caplog.at_level(logging.WARNING, logger="governed_memory.agent"):
        assert agent.run("loop forever") == ""
    assert len(stub_llm.requests) == 4
    assert "cap of 4 iterations" in caplog.text


def test_auto_mode_without_tools_answers_once(stub_llm: StubLLM, workspace: Path) -> None:
    make(stub_llm, workspace, max_loops="auto").run("hi")
    assert len(stub_llm.requests) == 1


def test_integer_loops_call_the_model_that_many_times(stub_llm: StubLLM, workspace: Path) -> None:
    stub_llm.queue("one", "two", "three")
    agent = make(stub_llm, workspace, max_loops=3)
    assert agent.run("count") == "three"
    assert [m["content"] for m in agent.short_memory.conversation_history[1:]] == [
        "one",
        "two",
        "three",
    ]


def test_stopping_condition_ends_the_run(stub_llm: StubLLM, workspace: Path) -> None:
    stub_llm.queue("working", "DONE", "never sent")
    agent = make(stub_llm, workspace, max_loops=5, stopping_condition=lambda reply: "DONE" in reply)
    assert agent.run("go") == "DONE"
    assert len(stub_llm.requests) == 2


def test_a_failing_model_raises_after_retries_and_keeps_the_task(
    stub_llm: StubLLM, workspace: Path
) -> None:
    stub_llm.responder = lambda body: {"status": 500}
    agent = make(stub_llm, workspace, retry_attempts=2, llm_args={"max_retries": 0})
    with pytest.raises(ModelCallError, match="house-model"):
        agent.run("important task")
    assert len(stub_llm.requests) == 2
    assert agent.short_memory.conversation_history[-1]["content"] == "important task"


# -- validation --------------------------------------------------------------------


@pytest.mark.parametrize("name", ["../x", "/abs", "a/b", "", "."])
def test_bad_agent_names_are_refused(name: str, workspace: Path) -> None:
    with pytest.raises(InvalidAgentNameError):
        Agent(name, model_name="gpt-4o-mini", workspace_dir=workspace, context_length=100)
    assert list(workspace.iterdir()) == []


@pytest.mark.parametrize("max_loops", [0, -1, True, "forever", 2.5])
def test_bad_max_loops_is_refused(max_loops: Any, workspace: Path) -> None:
    with pytest.raises(ConfigurationError, match=re.escape(f"max_loops={max_loops!r}")):
        Agent("A", max_loops=max_loops, workspace_dir=workspace, context_length=100)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("context_length", 0),
        ("auto_max_loops", 0),
        ("retry_attempts", 0),
        ("max_tokens", -5),
        ("model_name", " "),
        ("temperature", -0.5),
        ("user_name", "Hu\nman"),
        ("user_name", ""),
    ],
)
def test_bad_arguments_are_refused(key: str, value: Any, workspace: Path) -> None:
    kwargs: dict[str, Any] = {"workspace_dir": workspace, "context_length": 100, key: value}
    with pytest.raises(ConfigurationError, match=re.escape(repr(value))):
        Agent("A", **kwargs)


@pytest.mark.parametrize("task", ["", "   ", None])
def test_blank_task_is_refused(task: Any, stub_llm: StubLLM, workspace: Path) -> None:
    agent = make(stub_llm, workspace)
    with pytest.raises(ConfigurationError, match="task"):
        agent.run(task)
    assert stub_llm.requests == []


def test_auto_is_the_only_word_max_loops_accepts(workspace: Path) -> None:
    mode: Literal["auto"] = "auto"
    assert (
        Agent("A", max_loops=mode, workspace_dir=workspace, context_length=100).max_loops == "auto"
    )
