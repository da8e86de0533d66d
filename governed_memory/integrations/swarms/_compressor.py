"""GovernedContextCompressor: swarms' ContextCompressor under the policy's summarizer decision.

swarms' threshold check (``should_compress``, ``usage_ratio``), prompts and
completion call are kept. In default mode ``compress`` is swarms' own, byte
for byte. Under a policy, ``governed_memory.ContextCompressor`` runs the
compression with swarms' completion call as its summarizer, so the rules
are the ones every governed agent follows: erased subjects dropped first;
only ``compaction_transcript()`` summarised (under subject isolation, the
subject's own turns); the policy's ``summarizer_decision`` obeyed (the
external model refused, or replaced by the local extractive summarizer);
a blank summary wipes nothing. The summary keeps swarms' role ``user``:
swarms' ``to_messages`` sends no ``System`` row to the model, so a System
summary would vanish from the agent's context.
"""

from __future__ import annotations

from typing import Any

from swarms.agents.context_compressor import ContextCompressor as SwarmsContextCompressor  # type: ignore[import-untyped]  # no py.typed

from governed_memory import ContextCompressor, Transcript

__all__ = ["GovernedContextCompressor"]

SUMMARY_ROLE = "user"
"""The role swarms 16.0.3's compressor gives the summary (kept: see the module docstring)."""


class _SwarmsCompletion:
    """swarms' summary call (its prompts, model choice and parameters) as a governed_memory Summarizer."""

    remote = True

    def __init__(self, compressor: GovernedContextCompressor, agent: Any) -> None:
        self._compressor = compressor
        self._agent = agent
        self.model = str(compressor.summarizer_model or getattr(agent, "model_name", "") or "")

    def summarize(
        self, transcript: Transcript, *, max_tokens: int, temperature: float | None
    ) -> str:
        # max_tokens and temperature are the compressor's own, which _summarize reads.
        return str(self._compressor._summarize(self._agent, transcript.text))


class _MemoryInSwarmsRole:
    """The agent's GovernedConversation as the governed compressor sees it."""

    def __init__(self, memory: Any) -> None:
        self._memory = memory

    def __getattr__(self, name: str) -> Any:
        return getattr(self._memory, name)

    @property
    def token_count(self) -> int:
        # swarms' token_count is a flag; the count is count_history_tokens().
        return int(self._memory.count_history_tokens())

    def compact(
        self, summary: str, summary_role: str = "System", *, keep_other_subjects: bool = False
    ) -> None:
        self._memory.compact(summary, SUMMARY_ROLE, keep_other_subjects=keep_other_subjects)


class _AgentView:
    """A swarms Agent whose ``short_memory`` compacts in swarms' summary role."""

    def __init__(self, agent: Any) -> None:
        self._agent = agent
        self.short_memory = _MemoryInSwarmsRole(agent.short_memory)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._agent, name)


class GovernedContextCompressor(SwarmsContextCompressor):  # type: ignore[misc]  # swarms ships no types
    """swarms' ``ContextCompressor`` whose compression obeys the memory's policy.

    Same arguments as swarms' (``threshold``, ``summarizer_model``,
    ``summarizer_temperature``, ``summarizer_max_tokens``).
    """

    @classmethod
    def like(cls, compressor: Any) -> GovernedContextCompressor:
        """A governed compressor with the settings of swarms' ``compressor``."""
        return cls(
            threshold=compressor.threshold,
            summarizer_model=compressor.summarizer_model,
            summarizer_temperature=compressor.summarizer_temperature,
            summarizer_max_tokens=compressor.summarizer_max_tokens,
        )

    def compress(self, agent: Any) -> str | None:
        """Summarise and compact; the summary, or None when nothing (or the policy) stopped it."""
        gate = getattr(agent.short_memory, "governance", None)
        if gate is None:
            return super().compress(agent)  # type: ignore[no-any-return]
        governed = ContextCompressor(
            threshold=self.threshold,
            summarizer_temperature=self.summarizer_temperature,
            summarizer_max_tokens=self.summarizer_max_tokens,
            summarizer=_SwarmsCompletion(self, agent),
            governance=gate,
        )
        return governed.compress(_AgentView(agent))
