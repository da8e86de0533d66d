"""Review findings: each test states one behaviour a GovernedSession must keep (issue 15, point 2)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from agents import Agent, Runner
from agents.tracing import TracingProcessor, set_trace_processors
from agents.tracing.processors import default_processor
from oai_helpers import SUBJECT, Setup, run

from governed_memory import ConfigurationError
from governed_memory.integrations.openai_agents import GovernedSession

if TYPE_CHECKING:
    from agents import OpenAIChatCompletionsModel
    from llm_stub import StubLLM

CANARY = "card 4111-1111-1111-1111"


class Collector(TracingProcessor):
    """Keeps the spans it is given in the process (nothing is exported)."""

    def __init__(self) -> None:
        self.spans: list[Any] = []

    def on_trace_start(self, trace: Any) -> None: ...

    def on_trace_end(self, trace: Any) -> None: ...

    def on_span_start(self, span: Any) -> None: ...

    def on_span_end(self, span: Any) -> None:
        self.spans.append(span)

    def shutdown(self) -> None: ...

    def force_flush(self) -> None: ...


@pytest.fixture
def local_traces() -> Iterator[Collector]:
    collector = Collector()
    set_trace_processors([collector])
    yield collector
    set_trace_processors([default_processor()])


def test_a_traced_run_without_new_input_sends_no_stored_item_to_a_span(
    regulated: Setup, model: OpenAIChatCompletionsModel, stub_llm: StubLLM, local_traces: Collector
) -> None:
    """Runner.run(agent, [], session=s) saves nothing before its model call: get_items must refuse."""
    s = GovernedSession("conv-1", subject_id=SUBJECT, governance=regulated.gov)
    run(s.add_items([{"role": "user", "content": CANARY}]))
    agent = Agent(name="Teller", instructions="Answer briefly.", model=model)
    with pytest.raises(ConfigurationError, match="refused: the run is traced"):
        run(Runner.run(agent, [], session=s))
    assert CANARY not in repr([span.export() for span in local_traces.spans])
    assert stub_llm.requests == []
