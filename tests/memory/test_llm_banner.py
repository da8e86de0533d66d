"""litellm's "Give Feedback / Get Help" banner never reaches our output, whichever path calls a model.

The switch sits where governed_memory reaches litellm (``import_litellm``),
so a ContextCompressor used without an Agent gets it as the Agent does. Real
litellm calls against the stub server on 127.0.0.1.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from llm_stub import StubLLM

from governed_memory import ContextCompressor, Conversation, ModelCallError


class _Agent:
    """The attributes a ContextCompressor reads from an agent-like object."""

    def __init__(self, memory: Conversation, stub: StubLLM) -> None:
        self.agent_name = "Summ"
        self.model_name = "openai/house-model"
        self.context_length = 100
        self.short_memory = memory
        self.user_name = "Human"
        self.api_base = stub.url
        self.api_key = "sk-test"


def test_a_failed_compression_without_an_agent_prints_nothing_from_litellm(
    stub_llm: StubLLM,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
) -> None:
    from governed_memory._memory._llm import import_litellm

    # As litellm is when the application imported it before governed_memory did.
    monkeypatch.setattr(import_litellm(), "suppress_debug_info", False)
    memory = Conversation(memory_md_path=tmp_path / "agents" / "Summ" / "MEMORY.md")
    memory.add("Human", "please remember the standing order " * 20)
    stub_llm.responder = lambda body: {"status": 500}
    capfd.readouterr()
    with pytest.raises(ModelCallError, match="house-model"):
        ContextCompressor().compress(_Agent(memory, stub_llm))
    assert stub_llm.requests  # the call reached the stub and failed there
    out, err = capfd.readouterr()
    assert "Give Feedback" not in out + err
    assert "litellm" not in (out + err).lower()
