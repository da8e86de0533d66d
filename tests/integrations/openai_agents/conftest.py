"""Fixtures of the OpenAI Agents SDK tests: a Governance per shipped policy, an SDK model on the stub."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from oai_helpers import Collector, Setup, close_audit, make_setup

if TYPE_CHECKING:
    from agents import OpenAIChatCompletionsModel
    from llm_stub import StubLLM


@pytest.fixture(params=["default", "regulated"])
def setup(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Setup]:
    """The workspace under each shipped policy the issue names."""
    made = make_setup(tmp_path, str(request.param))
    yield made
    close_audit(made.gov)


@pytest.fixture
def regulated(tmp_path: Path) -> Iterator[Setup]:
    made = make_setup(tmp_path, "regulated")
    yield made
    close_audit(made.gov)


@pytest.fixture
def model(stub_llm: StubLLM) -> OpenAIChatCompletionsModel:
    """An Agents SDK chat-completions model served by the stub on 127.0.0.1."""
    from agents import OpenAIChatCompletionsModel
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=stub_llm.url, api_key="sk-test", max_retries=0)
    return OpenAIChatCompletionsModel(model="stub-model", openai_client=client)


@pytest.fixture
def local_traces() -> Iterator[Collector]:
    """The SDK's traces go to a local collector for the test (not to OpenAI's exporter thread)."""
    from agents.tracing import set_trace_processors
    from agents.tracing.processors import default_processor

    collector = Collector()
    set_trace_processors([collector])
    yield collector
    set_trace_processors([default_processor()])
