"""ContextCompressor: summarize an agent's history before it overflows the context window.

Reference-behaviour C13-C14 with two defects fixed:

* D9: the threshold check reads ``short_memory.token_count``, a running total
  that costs time proportional to the messages added since the last check,
  not to the length of the history (the reference re-tokenises the whole
  history string on every loop).
* D8: a blank summary never wipes the history (``Conversation.compact``
  refuses it), and after a failed or ineffective compression the compressor
  backs off exponentially instead of paying for another full-history
  summary call on every loop.

The summary lands as a ``System`` message, as the design says (the reference
16.0.3 uses ``user``; see docs/compatibility.md).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._errors import ConfigurationError, EmptySummaryError
from .._format import LINEAGE_KEY, PRELOAD_PREFIX, parse_memory, record_lineage
from .._protocols import CONFIGURED, Configured, ConsentGate, Skip, UseLocal, resolve_governance
from ._summarizers import SUMMARY_PREFIX, Summarizer, Transcript, summarizer_for

__all__ = ["SUMMARY_PREFIX", "Backoff", "ContextCompressor"]

logger = logging.getLogger("governed_memory.compression")


class Backoff:
    """Exponential backoff: after the n-th failure in a row, wait ``initial * factor**(n-1)``.

    Args:
        initial: seconds to wait after the first failure.
        factor: growth per further failure.
        maximum: the longest wait.
        clock: monotonic seconds (default :func:`time.monotonic`).
    """

    def __init__(
        self,
        *,
        initial: float = 30.0,
        factor: float = 2.0,
        maximum: float = 1800.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        for name, value, low in (
            ("initial", initial, 0.0),
            ("factor", factor, 1.0),
            ("maximum", maximum, 0.0),
        ):
            if isinstance(value, bool) or not isinstance(value, int | float) or not value >= low:
                raise ConfigurationError(f"Backoff {name}={value!r} must be a number >= {low}")
        self.initial = float(initial)
        self.factor = float(factor)
        self.maximum = float(maximum)
        self._clock = clock
        self.failures = 0
        self._until: float | None = None

    def ready(self) -> bool:
        """Whether the wait after the last failure is over (True when none failed)."""
        return self._until is None or self._clock() >= self._until

    def remaining(self) -> float:
        """Seconds left to wait (0 when ready)."""
        return 0.0 if self._until is None else max(self._until - self._clock(), 0.0)

    def failed(self) -> float:
        """Record a failure; return the seconds to wait before the next attempt."""
        delay = min(self.initial * self.factor**self.failures, self.maximum)
        self.failures += 1
        self._until = self._clock() + delay
        return delay

    def succeeded(self) -> None:
        """Record a success: the next failure waits ``initial`` again."""
        self.failures = 0
        self._until = None

    def __repr__(self) -> str:
        return f"Backoff(failures={self.failures}, remaining={self.remaining():.1f}s)"


def _check_threshold(threshold: object) -> float:
    if (
        isinstance(threshold, bool)
        or not isinstance(threshold, int | float)
        or not math.isfinite(threshold)
        or not 0.0 < threshold <= 1.0
    ):
        raise ConfigurationError(
            f"threshold must be in (0, 1], got {threshold!r}; give the fraction of the context "
            "window at which to compress, e.g. 0.9"
        )
    return float(threshold)


def _static_count(memory: Any, history: Sequence[Mapping[str, Any]]) -> int:
    """How many leading messages are the static context compaction re-seeds."""
    n = 0
    for name in ("system_prompt", "rules", "custom_rules_prompt"):
        content = getattr(memory, name, None)
        if content is not None and n < len(history) and history[n].get("content") == content:
            n += 1
    return n


def _subjects(messages: Sequence[Mapping[str, Any]]) -> set[str | None]:
    """The data subjects of the turns (None for a turn without one).

    A summary among them (a message or a preloaded record with lineage)
    brings in every subject it was derived from: its text is theirs too.
    """
    subjects: set[str | None] = set()
    for message in messages:
        content = message.get("content")
        if isinstance(content, str) and content.startswith(PRELOAD_PREFIX):
            for record in parse_memory(content[len(PRELOAD_PREFIX) :]).records:
                if record.role != "System":
                    subjects.add(record.subject_id)
                subjects.update(record_lineage(record))
        else:
            if message.get("role") != "System":
                subject = message.get("subject_id")
                subjects.add(subject if isinstance(subject, str) else None)
            lineage = message.get(LINEAGE_KEY)
            if isinstance(lineage, list | tuple):
                subjects.update(v for v in lineage if isinstance(v, str))
    return subjects


class ContextCompressor:
    """Watches an agent's token usage and compresses its history past a threshold.

    Works with any agent-like object that has ``short_memory`` (a
    Conversation: ``return_history_as_string()`` and ``compact()``),
    ``context_length`` and ``model_name``; ``api_base``/``api_key`` and
    ``user_name`` are used when present.

    Args:
        threshold: fraction of ``context_length`` at which to compress, in (0, 1].
        summarizer_model: model for the summary (default: the agent's
            ``model_name``); ``local/extractive`` never leaves the process.
        summarizer_temperature: temperature of the summary call (None: the
            provider's default, as the reference 16.0.3).
        summarizer_max_tokens: the longest summary, in tokens.
        summarizer: a :class:`Summarizer` to use instead of one built from
            the model name.
        api_base, api_key: for ``summarizer_model``; when it is not set, the
            agent's own ``api_base``/``api_key`` are used.
        backoff: the wait after failures (default: 30 s doubling to 30 min).
        clock: monotonic seconds for the default backoff.
        governance: the consent gate that chooses the summarizer when the
            agent's memory has none (a reference Conversation). Not given:
            the policy the settings configure, as for :class:`Conversation`
            (none when no policy is); None is refused while a non-default
            policy is configured.

    Raises:
        ConfigurationError: (a ValueError) a threshold outside (0, 1] or a
            max_tokens below 1.
    """

    def __init__(
        self,
        threshold: float = 0.9,
        summarizer_model: str | None = None,
        summarizer_temperature: float | None = None,
        summarizer_max_tokens: int = 4000,
        *,
        summarizer: Summarizer | None = None,
        api_base: str | None = None,
        api_key: str | None = None,
        backoff: Backoff | None = None,
        clock: Callable[[], float] | None = None,
        governance: ConsentGate[Any] | Configured | None = CONFIGURED,
    ) -> None:
        self.threshold = _check_threshold(threshold)
        if (
            isinstance(summarizer_max_tokens, bool)
            or not isinstance(summarizer_max_tokens, int)
            or summarizer_max_tokens < 1
        ):
            raise ConfigurationError(
                f"summarizer_max_tokens must be a whole number >= 1, got {summarizer_max_tokens!r}"
            )
        if summarizer_temperature is not None and (
            isinstance(summarizer_temperature, bool)
            or not isinstance(summarizer_temperature, int | float)
            or not summarizer_temperature >= 0
        ):
            raise ConfigurationError(
                f"summarizer_temperature must be None or a number >= 0, got {summarizer_temperature!r}"
            )
        if summarizer_model is not None and (
            not isinstance(summarizer_model, str) or not summarizer_model.strip()
        ):
            raise ConfigurationError(
                f"summarizer_model {summarizer_model!r} must be None or a model name such as "
                "'gpt-4o-mini' or 'local/extractive'"
            )
        self.summarizer_model = summarizer_model
        self.summarizer_temperature = summarizer_temperature
        self.summarizer_max_tokens = summarizer_max_tokens
        self.summarizer = summarizer
        self.api_base = api_base
        self.api_key = api_key
        self.backoff = backoff or Backoff(clock=clock or time.monotonic)
        self.governance: ConsentGate[Any] | None = resolve_governance(
            governance, what="ContextCompressor(governance=None)"
        )
        self.last_error: BaseException | None = None
        """The exception of the last failed :meth:`maybe_compress`, if any."""

    # -- measuring -------------------------------------------------------

    def history_tokens(self, agent: Any) -> int:
        """Tokens of the agent's history: the running total when the memory keeps one."""
        memory = agent.short_memory
        running = getattr(memory, "token_count", None)
        # The reference Conversation has a *boolean* token_count flag.
        if isinstance(running, int) and not isinstance(running, bool):
            return running
        from .._format import counter_for

        history = memory.return_history_as_string()
        return counter_for(getattr(agent, "model_name", None))(history) if history.strip() else 0

    def usage_ratio(self, agent: Any) -> float:
        """History tokens / ``agent.context_length`` (0.0 when the length is unset)."""
        context_length = getattr(agent, "context_length", None)
        if not context_length:
            return 0.0
        return self.history_tokens(agent) / float(context_length)

    def should_compress(self, agent: Any) -> bool:
        """True once usage has reached the threshold."""
        return self.usage_ratio(agent) >= self.threshold

    # -- compressing -----------------------------------------------------

    def _summarizer(self, agent: Any) -> Summarizer:
        if self.summarizer is not None:
            return self.summarizer
        if self.summarizer_model is not None:
            return summarizer_for(
                self.summarizer_model, api_base=self.api_base, api_key=self.api_key
            )
        model = getattr(agent, "model_name", None)
        if not model:
            raise ConfigurationError(
                "no summarizer_model configured and the agent has no model_name; pass "
                "ContextCompressor(summarizer_model='local/extractive') or a model name"
            )
        return summarizer_for(
            model,
            api_base=getattr(agent, "api_base", None),
            api_key=getattr(agent, "api_key", None),
        )

    def _governed(
        self,
        summarizer: Summarizer,
        memory: Any,
        turns: Sequence[Mapping[str, Any]],
        agent_name: str,
    ) -> Summarizer | None:
        """The summarizer the policy allows (None: do not summarize)."""
        gate: ConsentGate[Any] | None = getattr(memory, "governance", None) or self.governance
        if gate is None or not hasattr(gate, "summarizer_decision"):
            return summarizer
        decision = gate.summarizer_decision(summarizer.model, _subjects(turns), agent=agent_name)
        if isinstance(decision, Skip):
            logger.info(
                "[ContextCompressor] '%s': summary skipped by policy: %s",
                agent_name,
                decision.reason,
            )
            return None
        if isinstance(decision, UseLocal):
            logger.info(
                "[ContextCompressor] '%s': using %s instead of %s: %s",
                agent_name,
                decision.model,
                summarizer.model,
                decision.reason,
            )
            return summarizer_for(decision.model)
        return summarizer

    def compress(self, agent: Any) -> str | None:
        """Summarize the history and compact the agent's memory to that summary.

        Returns the summary (without the prefix), or None when the history is
        blank or the policy skipped summarization.

        Raises:
            EmptySummaryError: the summarizer returned nothing; the history
                is kept.
            ModelCallError: the summary call failed; the history is kept.
            StorageError: compaction failed on disk; the history is kept.
        """
        memory = agent.short_memory
        drop_erased = getattr(memory, "drop_erased", None)
        if callable(drop_erased):
            drop_erased()  # governed mode: never summarize what an erasure removed
        # A governed_memory Conversation says what a summary may be built from
        # (under subject isolation: its subject's own turns, not the agent's
        # shared records nor other subjects' messages); any other memory: all of it.
        transcript_of = getattr(memory, "compaction_transcript", None)
        turns: Sequence[Mapping[str, Any]]
        if callable(transcript_of):
            history, turns = transcript_of()
        else:
            history = memory.return_history_as_string()
            messages = getattr(memory, "conversation_history", None)
            turns = (
                messages[_static_count(memory, messages) :] if isinstance(messages, list) else ()
            )
        if not history.strip() or (callable(transcript_of) and not turns):
            return None
        agent_name = str(getattr(agent, "agent_name", "agent"))
        summarizer = self._governed(self._summarizer(agent), memory, turns, agent_name)
        if summarizer is None:
            return None
        before = self.history_tokens(agent)
        logger.info(
            "[ContextCompressor] compressing '%s' at %d / %s tokens with %s",
            agent_name,
            before,
            getattr(agent, "context_length", None),
            summarizer.model,
        )
        transcript = Transcript(
            text=history,
            messages=tuple(turns),
            user_role=getattr(agent, "user_name", None) or getattr(memory, "user", None),
        )
        summary = summarizer.summarize(
            transcript,
            max_tokens=self.summarizer_max_tokens,
            temperature=self.summarizer_temperature,
        )
        if summary is None or not str(summary).strip():
            raise EmptySummaryError(
                f"summarizer {summarizer.model!r} returned an empty summary for '{agent_name}'; "
                "the history was kept. Check the summarizer, or use 'local/extractive'"
            )
        if callable(transcript_of):
            memory.compact(
                summary=SUMMARY_PREFIX + summary, summary_role="System", keep_other_subjects=True
            )
        else:
            memory.compact(summary=SUMMARY_PREFIX + summary, summary_role="System")
        logger.info(
            "[ContextCompressor] compressed '%s': %d -> %d tokens",
            agent_name,
            before,
            self.history_tokens(agent),
        )
        return summary

    def maybe_compress(self, agent: Any) -> str | None:
        """Compress when due and not backing off; never raises.

        Returns the summary, or None when nothing was done. A failure, or a
        compression that leaves usage above the threshold, starts (or
        lengthens) the backoff; a successful one resets it.
        """
        try:
            if not self.should_compress(agent):
                return None
            if not self.backoff.ready():
                logger.debug(
                    "[ContextCompressor] over the threshold, backing off %.0fs more",
                    self.backoff.remaining(),
                )
                return None
            summary = self.compress(agent)
            still_over = self.should_compress(agent)
        except Exception as exc:
            self.last_error = exc
            delay = self.backoff.failed()
            logger.error(
                "[ContextCompressor] compression failed: %s: %s. Continuing without "
                "compression; next attempt in %.0fs",
                type(exc).__name__,
                exc,
                delay,
            )
            return None
        if still_over:
            delay = self.backoff.failed()
            logger.warning(
                "[ContextCompressor] usage is still at or above %.0f%% of the context window "
                "after compression%s; next attempt in %.0fs. Lower summarizer_max_tokens or "
                "raise context_length",
                self.threshold * 100,
                "" if summary is not None else " (skipped)",
                delay,
            )
        else:
            self.last_error = None
            self.backoff.succeeded()
        return summary

    def __repr__(self) -> str:
        model = self.summarizer.model if self.summarizer is not None else self.summarizer_model
        return (
            f"ContextCompressor(threshold={self.threshold}, summarizer_model={model!r}, "
            f"summarizer_max_tokens={self.summarizer_max_tokens})"
        )
