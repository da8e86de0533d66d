"""ContextCompressor: thresholds, the reference's request byte for byte, compaction, backoff."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from llm_stub import StubLLM

from governed_memory import (
    Backoff,
    ContextCompressor,
    Conversation,
    EmptySummaryError,
    ExtractiveSummarizer,
    GovernedMemoryError,
    LiteLLMSummarizer,
    ModelCallError,
    Transcript,
    counter_for,
    parse_memory,
)
from governed_memory._memory._compressor import SUMMARY_PREFIX
from governed_memory._memory._summarizers import (
    COMPRESSION_SYSTEM_PROMPT,
    COMPRESSION_USER_TEMPLATE,
)

SYSTEM_PROMPT = "You are helpful."
FIXTURE_TIMES = [
    "2026-11-30T04:00:25.196358",  # system prompt
    "2026-11-30T04:00:25.196439",
    "2026-11-30T04:00:25.196453",
    "2026-11-30T04:00:25.196465",
    "2026-11-30T04:00:25.196477",
    "2026-11-30T04:00:25.196489",
    "2026-11-30T04:00:25.196500",
    "2026-11-30T04:00:26.249607",  # the summary
]


class ScriptedClock:
    """Returns the given times in order, then keeps ticking by 1 ms."""

    def __init__(self, times: list[str]) -> None:
        self._times: Iterator[dt.datetime] = iter(dt.datetime.fromisoformat(t) for t in times)
        self._last = dt.datetime.fromisoformat(times[0])

    def now(self) -> dt.datetime:
        self._last = next(self._times, self._last + dt.timedelta(milliseconds=1))
        return self._last


class FakeAgent:
    """The attributes the reference's compressor reads from an Agent."""

    def __init__(self, memory: Any, *, context_length: int | None = 100, **extra: Any) -> None:
        self.agent_name = "Summ"
        self.model_name = "gpt-4o-mini"
        self.context_length = context_length
        self.short_memory = memory
        self.user_name = "Human"
        for key, value in extra.items():
            setattr(self, key, value)


class Recording:
    """A summarizer that records its calls and returns canned text (or raises)."""

    model = "recording"
    remote = False

    def __init__(self, reply: str | Exception = "the summary") -> None:
        self.reply = reply
        self.calls: list[tuple[Transcript, int, float | None]] = []

    def summarize(
        self, transcript: Transcript, *, max_tokens: int, temperature: float | None
    ) -> str:
        self.calls.append((transcript, max_tokens, temperature))
        if isinstance(self.reply, Exception):
            raise self.reply
        return self.reply


class Ticker:
    """A monotonic clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def fixture_conversation(memory_md_path: Path | None = None) -> Conversation:
    """The six turns of the reference's compressor fixture, with its timestamps."""
    conversation = Conversation(
        name="Summ_id_fixture_conversation",
        system_prompt=SYSTEM_PROMPT,
        time_enabled=True,
        clock=ScriptedClock(FIXTURE_TIMES),
        memory_md_path=memory_md_path,
    )
    for i in range(6):
        role = "Human" if i % 2 == 0 else "Summ"
        conversation.add(role, f"turn {i}: the budget for project Falcon is {1000 + i} EUR")
    return conversation


@pytest.fixture
def llm_call(fixtures_dir: Path) -> dict[str, Any]:
    return json.loads((fixtures_dir / "compressor" / "llm_call.json").read_text())


# -- construction -----------------------------------------------------------


def test_defaults_match_the_reference(fixtures_dir: Path) -> None:
    defaults = json.loads((fixtures_dir / "compressor" / "defaults.json").read_text())
    compressor = ContextCompressor()
    assert {
        "threshold": compressor.threshold,
        "summarizer_model": compressor.summarizer_model,
        "summarizer_temperature": compressor.summarizer_temperature,
        "summarizer_max_tokens": compressor.summarizer_max_tokens,
    } == defaults


@pytest.mark.parametrize(
    "threshold", [0, 0.0, -0.5, 1.0001, 2, float("nan"), float("inf"), True, "0.5", None]
)
def test_threshold_outside_0_1_is_refused(threshold: Any) -> None:
    with pytest.raises(ValueError, match=r"threshold must be in \(0, 1\], got") as info:
        ContextCompressor(threshold=threshold)
    assert repr(threshold) in str(info.value)
    assert isinstance(info.value, GovernedMemoryError)


@pytest.mark.parametrize("threshold", [1, 1.0, 0.5, 1e-9])
def test_threshold_inside_0_1_is_accepted(threshold: float) -> None:
    assert ContextCompressor(threshold=threshold).threshold == threshold


@pytest.mark.parametrize(
    "kwargs",
    [
        {"summarizer_max_tokens": 0},
        {"summarizer_max_tokens": 10.5},
        {"summarizer_temperature": -1},
        {"summarizer_model": ""},
    ],
)
def test_bad_summarizer_parameters_are_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=repr(next(iter(kwargs.values()))).replace(".", r"\.")):
        ContextCompressor(**kwargs)


# -- measuring --------------------------------------------------------------


def test_usage_ratio_matches_the_reference(fixtures_dir: Path) -> None:
    usage = json.loads((fixtures_dir / "compressor" / "usage_ratio.json").read_text())
    agent = FakeAgent(fixture_conversation(), context_length=usage["context_length"])
    compressor = ContextCompressor()
    assert compressor.usage_ratio(agent) == usage["usage_ratio"]
    assert compressor.should_compress(agent) is usage["should_compress"]


@pytest.mark.parametrize("context_length", [None, 0])
def test_usage_ratio_is_zero_without_a_context_length(context_length: int | None) -> None:
    agent = FakeAgent(fixture_conversation(), context_length=context_length)
    assert ContextCompressor().usage_ratio(agent) == 0.0
    assert ContextCompressor(threshold=1e-9).should_compress(agent) is False


def test_usage_ratio_reads_the_running_total_not_the_history_string() -> None:
    class Memory:
        token_count = 450

        def return_history_as_string(self) -> str:
            raise AssertionError("the whole history must not be rendered for the check")

    agent = FakeAgent(Memory(), context_length=500)
    assert ContextCompressor().usage_ratio(agent) == 0.9
    assert ContextCompressor().should_compress(agent) is True


def test_usage_ratio_of_a_memory_without_a_running_total() -> None:
    """A reference-style Conversation: token_count is a boolean flag there."""

    class ReferenceMemory:
        token_count = False

        def return_history_as_string(self) -> str:
            return "Human: hello world"

    agent = FakeAgent(ReferenceMemory(), context_length=100)
    expected = counter_for("gpt-4o-mini")("Human: hello world") / 100
    assert ContextCompressor().usage_ratio(agent) == expected


# -- the request, byte for byte ---------------------------------------------


def test_prompts_are_the_references(llm_call: dict[str, Any]) -> None:
    assert llm_call["messages"][0]["content"] == COMPRESSION_SYSTEM_PROMPT
    user = llm_call["messages"][1]["content"]
    prefix, suffix = COMPRESSION_USER_TEMPLATE.split("{history}")
    assert user.startswith(prefix)
    assert user.endswith(suffix)


def test_request_at_the_server_matches_the_reference(
    stub_llm: StubLLM, llm_call: dict[str, Any], fixtures_dir: Path
) -> None:
    summary = (fixtures_dir / "compressor" / "compress_return.txt").read_text()
    stub_llm.queue(summary)
    agent = FakeAgent(fixture_conversation(), api_base=stub_llm.url, api_key="sk-test")

    assert ContextCompressor().compress(agent) == summary

    (body,) = stub_llm.requests
    assert stub_llm.paths == ["/v1/chat/completions"]
    assert body["model"] == llm_call["model"]
    assert body["messages"] == llm_call["messages"]  # timestamps included
    assert body["max_tokens"] == llm_call["max_tokens"]
    assert "temperature" not in body  # None, as in the reference: the provider default


def test_litellm_arguments_match_the_reference(llm_call: dict[str, Any]) -> None:
    seen: dict[str, Any] = {}

    def completion(**kwargs: Any) -> Any:
        seen.update(kwargs)
        from litellm import ModelResponse

        return ModelResponse(choices=[{"message": {"role": "assistant", "content": "s"}}])

    compressor = ContextCompressor(
        summarizer=LiteLLMSummarizer("gpt-4o-mini", completion=completion)
    )
    compressor.compress(FakeAgent(fixture_conversation()))
    ours = {k: v for k, v in seen.items() if k not in ("no-log", "turn_off_message_logging")}
    assert ours == llm_call
    assert seen["no-log"] is True and seen["turn_off_message_logging"] is True


def test_temperature_and_max_tokens_are_passed_through() -> None:
    summarizer = Recording()
    compressor = ContextCompressor(
        summarizer_temperature=0.1, summarizer_max_tokens=321, summarizer=summarizer
    )
    compressor.compress(FakeAgent(fixture_conversation()))
    ((transcript, max_tokens, temperature),) = summarizer.calls
    assert (max_tokens, temperature) == (321, 0.1)
    assert transcript.user_role == "Human"
    assert transcript.messages[0]["content"].startswith("turn 0")  # no system prompt
    assert transcript.text.startswith("[2026-11-30T04:00:25.196358] System: You are helpful.")


def test_compress_through_litellm_mock_response() -> None:
    summarizer = LiteLLMSummarizer(
        "gpt-4o-mini", completion_kwargs={"mock_response": "Falcon: 1000-1005 EUR."}
    )
    agent = FakeAgent(fixture_conversation())
    assert ContextCompressor(summarizer=summarizer).compress(agent) == "Falcon: 1000-1005 EUR."
    assert agent.short_memory.conversation_history[-1]["content"].endswith("Falcon: 1000-1005 EUR.")


def test_summarizer_model_takes_its_own_endpoint(stub_llm: StubLLM) -> None:
    agent = FakeAgent(fixture_conversation(), api_base="http://127.0.0.1:9/v1", api_key="unused")
    compressor = ContextCompressor(
        summarizer_model="openai/cheap", api_base=stub_llm.url, api_key="sk-test"
    )
    assert compressor.compress(agent) == "stub reply"
    assert stub_llm.requests[0]["model"] == "cheap"


# -- compaction -------------------------------------------------------------


def test_compress_compacts_to_a_system_summary(fixtures_dir: Path, workspace: Path) -> None:
    """As the reference's history_after.json, except the role: System per the design."""
    path = workspace / "agents" / "Summ" / "MEMORY.md"
    conversation = fixture_conversation(path)
    before = path.read_text()
    summary = (fixtures_dir / "compressor" / "compress_return.txt").read_text()
    expected = json.loads((fixtures_dir / "compressor" / "history_after.json").read_text())

    result = ContextCompressor(summarizer=Recording(summary)).compress(FakeAgent(conversation))

    assert result == summary
    history = conversation.conversation_history
    assert [m["content"] for m in history] == [m["content"] for m in expected]
    assert history[1]["content"] == SUMMARY_PREFIX + summary
    assert [m["role"] for m in history] == ["System", "System"]
    assert "timestamp" not in history[0] and "timestamp" in history[1]
    records = parse_memory(path.read_text()).records
    assert [(r.role, r.content) for r in records] == [("System", SUMMARY_PREFIX + summary)]
    (archive,) = (path.parent / "archive").iterdir()
    assert archive.read_text() == before


def test_blank_history_is_not_summarized() -> None:
    summarizer = Recording()
    conversation = Conversation()
    assert ContextCompressor(summarizer=summarizer).compress(FakeAgent(conversation)) is None
    assert summarizer.calls == []


@pytest.mark.parametrize("reply", ["", "   \n"])
def test_an_empty_summary_never_wipes_memory(reply: str, workspace: Path) -> None:
    path = workspace / "agents" / "Summ" / "MEMORY.md"
    conversation = fixture_conversation(path)
    history = list(conversation.conversation_history)
    on_disk = path.read_text()
    with pytest.raises(EmptySummaryError, match="recording"):
        ContextCompressor(summarizer=Recording(reply)).compress(FakeAgent(conversation))
    assert conversation.conversation_history == history
    assert path.read_text() == on_disk
    assert not (path.parent / "archive").exists()


def test_an_empty_model_reply_never_wipes_memory(stub_llm: StubLLM) -> None:
    stub_llm.queue("")
    conversation = fixture_conversation()
    history = list(conversation.conversation_history)
    agent = FakeAgent(conversation, api_base=stub_llm.url, api_key="sk-test")
    with pytest.raises(ModelCallError, match="empty reply"):
        ContextCompressor().compress(agent)
    assert conversation.conversation_history == history


# -- maybe_compress and backoff ---------------------------------------------


def test_maybe_compress_below_threshold_does_nothing() -> None:
    summarizer = Recording()
    agent = FakeAgent(fixture_conversation(), context_length=10_000)
    assert ContextCompressor(summarizer=summarizer).maybe_compress(agent) is None
    assert summarizer.calls == []


def test_maybe_compress_never_raises_and_backs_off_exponentially() -> None:
    ticker = Ticker()
    summarizer = Recording(RuntimeError("provider down"))
    compressor = ContextCompressor(summarizer=summarizer, clock=ticker)
    agent = FakeAgent(fixture_conversation())
    history = list(agent.short_memory.conversation_history)

    assert compressor.maybe_compress(agent) is None
    assert len(summarizer.calls) == 1
    assert isinstance(compressor.last_error, RuntimeError)
    assert agent.short_memory.conversation_history == history

    for _ in range(5):  # loops within the backoff window pay nothing
        assert compressor.maybe_compress(agent) is None
    assert len(summarizer.calls) == 1

    ticker.now += 30
    compressor.maybe_compress(agent)
    assert len(summarizer.calls) == 2
    ticker.now += 59  # the second wait is 60 s
    compressor.maybe_compress(agent)
    assert len(summarizer.calls) == 2
    ticker.now += 1
    summarizer.reply = "recovered"
    assert compressor.maybe_compress(agent) == "recovered"
    assert compressor.backoff.failures == 0
    assert compressor.last_error is None


def test_an_empty_summary_backs_off_too() -> None:
    ticker = Ticker()
    summarizer = Recording("")
    compressor = ContextCompressor(summarizer=summarizer, clock=ticker)
    agent = FakeAgent(fixture_conversation())
    assert compressor.maybe_compress(agent) is None
    assert isinstance(compressor.last_error, EmptySummaryError)
    assert compressor.maybe_compress(agent) is None
    assert len(summarizer.calls) == 1


def test_a_compression_that_stays_over_the_threshold_backs_off() -> None:
    ticker = Ticker()
    summarizer = Recording("word " * 200)
    compressor = ContextCompressor(summarizer=summarizer, clock=ticker)
    agent = FakeAgent(fixture_conversation())
    assert compressor.maybe_compress(agent) == "word " * 200
    assert compressor.backoff.failures == 1
    assert compressor.maybe_compress(agent) is None
    assert len(summarizer.calls) == 1


def test_backoff_caps_at_the_maximum() -> None:
    ticker = Ticker()
    backoff = Backoff(initial=10, factor=3, maximum=100, clock=ticker)
    assert [backoff.failed() for _ in range(4)] == [10, 30, 90, 100]
    assert not backoff.ready()
    ticker.now += 100
    assert backoff.ready()


@pytest.mark.parametrize("kwargs", [{"initial": -1}, {"factor": 0.5}, {"maximum": "1"}])
def test_bad_backoff_is_refused(kwargs: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match="Backoff"):
        Backoff(**kwargs)


# -- policy -----------------------------------------------------------------


def _governed(tmp_path: Path, **summarization: Any) -> Conversation:
    from governed_memory import Governance, Policy

    policy = Policy.model_validate({"summarization": summarization})
    conversation = fixture_conversation()
    conversation.governance = Governance(workspace=tmp_path, policy=policy)
    return conversation


def test_policy_replaces_an_external_summarizer_with_the_local_one(
    tmp_path: Path, stub_llm: StubLLM
) -> None:
    conversation = _governed(tmp_path, external_allowed=False, allowed_models=["local/*"])
    agent = FakeAgent(conversation, api_base=stub_llm.url, api_key="sk-test")
    summary = ContextCompressor().compress(agent)
    assert stub_llm.requests == []
    assert summary is not None and "Original task (Human): turn 0" in summary


def test_policy_can_skip_summarization(tmp_path: Path, stub_llm: StubLLM) -> None:
    conversation = _governed(tmp_path, allowed_models=["azure/*"], fallback="skip")
    history = list(conversation.conversation_history)
    agent = FakeAgent(conversation, api_base=stub_llm.url, api_key="sk-test")
    assert ContextCompressor().compress(agent) is None
    assert stub_llm.requests == []
    assert conversation.conversation_history == history


def test_local_summarizer_through_the_model_name() -> None:
    agent = FakeAgent(fixture_conversation())
    compressor = ContextCompressor(summarizer_model="local/extractive")
    summary = compressor.compress(agent)
    assert summary == ExtractiveSummarizer().summarize(
        Transcript(
            text="",
            messages=[
                {
                    "role": "Human" if i % 2 == 0 else "Summ",
                    "content": f"turn {i}: the budget for project Falcon is {1000 + i} EUR",
                }
                for i in range(6)
            ],
            user_role="Human",
        ),
        max_tokens=4000,
        temperature=None,
    )
