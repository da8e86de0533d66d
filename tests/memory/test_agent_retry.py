"""A failed model call is retried with jittered exponential backoff, except when retrying cannot help.

Real litellm calls against the stub server on 127.0.0.1; the wait between
tries is injected (``retry_sleep``), so nothing sleeps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from llm_stub import StubLLM

from governed_memory import Agent, ModelCallError
from governed_memory._memory._agent import RETRY_WAIT_FIRST, RETRY_WAIT_MAX


def make(stub: StubLLM, workspace: Path, waits: list[float], **kwargs: Any) -> Agent:
    return Agent(
        "Ada",
        model_name="openai/house-model",
        api_base=stub.url,
        api_key="sk-test",
        workspace_dir=workspace,
        retry_sleep=waits.append,
        **kwargs,
    )


def test_a_server_error_is_retried_after_growing_random_waits(
    stub_llm: StubLLM, workspace: Path
) -> None:
    stub_llm.queue({"status": 500}, {"status": 503}, "at last")
    waits: list[float] = []
    assert make(stub_llm, workspace, waits, retry_attempts=3).run("task") == "at last"
    assert len(stub_llm.requests) == 3  # the SDK's own retries are off: one request per try
    assert len(waits) == 2
    assert 0 <= waits[0] <= RETRY_WAIT_FIRST
    assert 0 <= waits[1] <= 2 * RETRY_WAIT_FIRST


def test_waits_are_jittered_and_capped(stub_llm: StubLLM, workspace: Path) -> None:
    stub_llm.responder = lambda body: {"status": 500}
    waits: list[float] = []
    with pytest.raises(ModelCallError):
        make(stub_llm, workspace, waits, retry_attempts=12).run("task")
    assert len(waits) == 11
    assert all(0 <= wait <= RETRY_WAIT_MAX for wait in waits)
    assert len(set(waits)) > 1, "full jitter: the waits are random, not one fixed delay"


@pytest.mark.parametrize("status", [400, 401, 403, 404])
def test_an_authentication_or_bad_request_error_is_not_retried(
    stub_llm: StubLLM, workspace: Path, status: int
) -> None:
    stub_llm.responder = lambda body: {"status": status}
    waits: list[float] = []
    agent = make(stub_llm, workspace, waits, retry_attempts=3)
    with pytest.raises(ModelCallError, match="house-model"):
        agent.run("task")
    assert len(stub_llm.requests) == 1
    assert waits == []
    assert agent.short_memory.conversation_history[-1]["content"] == "task"


def test_litellm_prints_no_banner_on_a_failed_call(
    stub_llm: StubLLM,
    workspace: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    from governed_memory._memory._llm import import_litellm

    monkeypatch.setattr(import_litellm(), "suppress_debug_info", False)  # litellm's default
    stub_llm.responder = lambda body: {"status": 500}
    with pytest.raises(ModelCallError):
        make(stub_llm, workspace, [], retry_attempts=1).run("task")
    out, err = capfd.readouterr()
    assert "Give Feedback" not in out + err
