"""A real agents.Runner on GovernedSession against the stub model on 127.0.0.1, under each shipped policy."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from agents import Agent, RunConfig, Runner
from agents.tracing import trace
from oai_helpers import SUBJECT, Collector, Setup, close_audit, run

from governed_memory import ConfigurationError, verify_audit_log
from governed_memory._audit import audit_log_dir
from governed_memory.integrations.openai_agents import GovernedSession

if TYPE_CHECKING:
    from agents import OpenAIChatCompletionsModel
    from llm_stub import StubLLM

UNTRACED = RunConfig(tracing_disabled=True)


def ask(agent: Agent[Any], text: str, session: GovernedSession, **kwargs: Any) -> str:
    result = run(Runner.run(agent, text, session=session, **kwargs))
    return str(result.final_output)


def assistant(model: OpenAIChatCompletionsModel) -> Agent[Any]:
    return Agent(name="Teller", instructions="Answer briefly.", model=model)


def sent(stub: StubLLM, n: int = -1) -> list[tuple[str, str]]:
    """(role, content) of the messages of the stub's ``n``-th request."""
    return [(m["role"], m["content"]) for m in stub.requests[n]["messages"]]


def test_a_restart_resumes_from_memory(
    setup: Setup, model: OpenAIChatCompletionsModel, stub_llm: StubLLM
) -> None:
    stub_llm.queue("Your balance is 12.", "You asked about your balance.")
    agent = assistant(model)
    first = GovernedSession("conv-1", subject_id=SUBJECT, governance=setup.gov)
    assert ask(agent, "What is my balance?", first, run_config=UNTRACED) == "Your balance is 12."
    close_audit(setup.gov)
    # A new process: a new Governance on the same workspace and settings, a new session.
    restarted = GovernedSession("conv-1", subject_id=SUBJECT, governance=setup.new_governance())
    ask(agent, "What did I ask?", restarted, run_config=UNTRACED)
    assert sent(stub_llm) == [
        ("system", "Answer briefly."),
        ("user", "What is my balance?"),
        ("assistant", "Your balance is 12."),
        ("user", "What did I ask?"),
    ]
    items = run(restarted.get_items())
    assert [i.get("role") for i in items] == ["user", "assistant", "user", "assistant"]
    if setup.gov.policy.audit.enabled:
        close_audit(restarted.governance)  # type: ignore[arg-type]
        folder = audit_log_dir(setup.gov.policy, setup.workspace)
        assert verify_audit_log(folder, setup.key(), workspace=setup.workspace).ok


def test_a_withdrawal_stops_the_next_runs_write(
    regulated: Setup, model: OpenAIChatCompletionsModel, stub_llm: StubLLM
) -> None:
    agent = assistant(model)
    s = GovernedSession("conv-1", subject_id=SUBJECT, governance=regulated.gov)
    ask(agent, "remember the blue door", s, run_config=UNTRACED)
    regulated.gov.withdraw(SUBJECT, "persist", actor="dpo@example.org")
    ask(agent, "and the red window", s, run_config=UNTRACED)
    regulated.gov.grant(SUBJECT, "persist", actor="dpo@example.org")
    restarted = GovernedSession("conv-1", subject_id=SUBJECT, governance=regulated.new_governance())
    contents = [i.get("content") for i in run(restarted.get_items())]
    assert contents[0] == "remember the blue door"
    assert "and the red window" not in contents and len(contents) == 2


def test_concurrent_sessions_in_one_runner_loop(
    setup: Setup, model: OpenAIChatCompletionsModel, stub_llm: StubLLM
) -> None:
    """Runs of eight sessions interleave on one event loop; each keeps its own turns, in order."""
    agent = assistant(model)
    sessions = [
        GovernedSession(f"conv-{i}", subject_id=SUBJECT, governance=setup.gov) for i in range(8)
    ]

    async def converse(s: GovernedSession) -> None:
        for turn in range(2):
            await Runner.run(agent, f"{s.session_id} turn {turn}", session=s, run_config=UNTRACED)

    async def main() -> None:
        await asyncio.gather(*(converse(s) for s in sessions))

    run(main())
    for s in sessions:
        items = run(s.get_items())
        assert [i["content"] for i in items if i.get("role") == "user"] == [
            f"{s.session_id} turn 0",
            f"{s.session_id} turn 1",
        ]


# -- the SDK's tracing -----------------------------------------------------------


def test_a_traced_run_is_refused_under_a_non_default_policy(
    regulated: Setup, model: OpenAIChatCompletionsModel, stub_llm: StubLLM, local_traces: Collector
) -> None:
    s = GovernedSession("conv-1", subject_id=SUBJECT, governance=regulated.gov)
    with pytest.raises(
        ConfigurationError,
        match=r"get_items of session 'conv-1' refused: the run is traced.*'regulated'.*tracing_disabled=True",
    ):
        ask(assistant(model), "hello", s)  # the SDK traces by default
    assert stub_llm.requests == []  # refused before anything reached the model
    kinds = {type(span.span_data).__name__ for span in local_traces.spans}
    assert not kinds & {"GenerationSpanData", "ResponseSpanData"}  # no model input in a span
    with trace("outside a run"), pytest.raises(ConfigurationError, match="add_items of session"):
        run(s.add_items([{"role": "user", "content": "x"}]))


def test_tracing_is_allowed_when_the_session_says_so_or_under_the_default_policy(
    tmp_path: Path, local_traces: Collector
) -> None:
    from oai_helpers import make_setup

    regulated = make_setup(tmp_path / "r", "regulated")
    default = make_setup(tmp_path / "d", "default")
    allowed = GovernedSession(
        "conv-1", subject_id=SUBJECT, governance=regulated.gov, allow_sdk_tracing=True
    )
    plain = GovernedSession("conv-1", subject_id=SUBJECT, governance=default.gov)
    with trace("local processors only"):
        for s in (allowed, plain):
            run(s.add_items([{"role": "user", "content": "x"}]))
            assert run(s.get_items()) == [{"role": "user", "content": "x"}]
    close_audit(regulated.gov)
