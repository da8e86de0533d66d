"""``local/extractive``: a summary made on this machine from the transcript's own sentences.

No network, no model weights, deterministic (the same transcript always
gives the same summary). It does not paraphrase; it selects. The summary has
three parts, in this order, within ``max_tokens`` (counted with tiktoken):

1. ``Original task (<role>): ...``: the first message recorded under the
   user's role (carried over from an earlier summary once that message has
   itself been compressed away), up to a quarter of the budget;
2. ``Key points from earlier turns:``: the most informative sentences of the
   other turns, in their original order. A sentence scores the sum of the
   inverse document frequency (over all sentences) of its distinct words,
   divided by the square root of its length in tokens; numbers count double, names
   (capitalised words inside a sentence) and words such as *error*, *failed*,
   *decided*, *must* count 1.5 times, and later sentences get up to 25% more.
   Exact repeats are kept once; filler (fewer than two content words and
   nothing salient, e.g. "Sure!", "ok thanks") is dropped.
3. ``Latest turns:``: the last ``keep_last`` turns, up to 35% of the budget.

Previous summaries and a preloaded MEMORY.md are unpacked into their turns
first, so a summary of a summary keeps the same shape instead of nesting.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..._errors import ConfigurationError
from ..._format import PRELOAD_PREFIX, parse_memory
from ._base import LOCAL_EXTRACTIVE, SUMMARY_PREFIX, Transcript

__all__ = ["ExtractiveSummarizer"]

TASK_LABEL = "Original task"
KEY_POINTS = "Key points from earlier turns:"
LATEST = "Latest turns:"
ELLIPSIS = " …"

_STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself
    yourselves ok okay yes please thanks thank sure happy help glad great good fine cool
    awesome perfect noted right alright hi hello hey let think course welcome sounds got""".split()  # noqa: SIM905
)
_SALIENT = frozenset(
    """error errors failed failure fails exception traceback retry retried decided decision
    agreed must required requirement deadline constraint budget todo blocked warning not never
    cannot""".split()  # noqa: SIM905
)
_TERM_RE = re.compile(r"\d[\d.,:/%-]*\d|\d|[^\W\d_][\w'-]*", re.UNICODE)
_SENTENCE_END_RE = re.compile(r"(?<=[.!?])\s+(?=[^\s])")
_HISTORY_LINE_RE = re.compile(r"^(?:\[[^\]\n]*\] )?([^:\n]{1,80}): ", re.MULTILINE)
_BULLET_RE = re.compile(r"^- ([^:\n]{1,80}): (.*)$")


@dataclass(frozen=True)
class _Turn:
    role: str
    text: str
    earlier_summary: bool = False


@dataclass(frozen=True)
class _Sentence:
    position: int
    role: str
    text: str


def _content(message: Mapping[str, Any]) -> str:
    content = message.get("content")
    return "" if content is None else content if isinstance(content, str) else str(content)


def _unpack(role: str, text: str) -> Iterable[_Turn]:
    """One message as turns: a preload becomes its records, a summary is flagged."""
    if text.startswith(PRELOAD_PREFIX):
        for record in parse_memory(text[len(PRELOAD_PREFIX) :]).records:
            yield from _unpack(record.role, record.content)
    elif text.startswith(SUMMARY_PREFIX):
        yield _Turn(role, text[len(SUMMARY_PREFIX) :], earlier_summary=True)
    elif text.strip():
        yield _Turn(role, text.strip())


def _turns_from_text(text: str) -> list[tuple[str, str]]:
    """Split a history string into (role, content) when no messages were given."""
    starts = [
        m
        for m in _HISTORY_LINE_RE.finditer(text)
        if m.start() == 0 or text[m.start() - 2 : m.start()] == "\n\n"
    ]
    turns = []
    for i, match in enumerate(starts):
        end = starts[i + 1].start() - 2 if i + 1 < len(starts) else len(text)
        turns.append((match.group(1), text[match.end() : end]))
    return turns


def _sentences(text: str) -> list[str]:
    out: list[str] = []
    for line in text.splitlines():
        line = " ".join(line.split())
        if line.startswith(("- ", "* ")):
            line = line[2:]
        out.extend(s for s in _SENTENCE_END_RE.split(line) if len(s) >= 3)
    return out


def _terms(sentence: str) -> list[tuple[str, float]]:
    terms: list[tuple[str, float]] = []
    for i, match in enumerate(_TERM_RE.finditer(sentence)):
        word = match.group(0)
        lower = word.lower()
        if lower in _STOPWORDS:
            continue
        if word[0].isdigit():
            weight = 2.0
        elif lower in _SALIENT or (i > 0 and word[0].isupper()):
            weight = 1.5
        else:
            weight = 1.0
        terms.append((lower, weight))
    return terms


def _informative(sentence: str) -> bool:
    """False for filler: fewer than two content words, no number, nothing salient."""
    terms = _terms(sentence)
    return len(terms) >= 2 or any(weight > 1.0 for _, weight in terms)


def _scores(sentences: Sequence[_Sentence], count: Callable[[str], int]) -> list[float]:
    term_lists = [_terms(s.text) for s in sentences]
    df: Counter[str] = Counter()
    for terms in term_lists:
        df.update({t for t, _ in terms})
    n = len(sentences)
    scores = []
    for s, terms in zip(sentences, term_lists, strict=True):
        best: dict[str, float] = {}
        for term, weight in terms:
            best[term] = max(best.get(term, 0.0), weight)
        idf_sum = sum(w * (math.log((1 + n) / (1 + df[t])) + 1.0) for t, w in best.items())
        recency = 1.0 + 0.25 * (s.position / max(n - 1, 1))
        # Divided by the square root of its length in tokens: long, punctuation-heavy
        # text (JSON, logs) pays for the budget it would take.
        scores.append(idf_sum / math.sqrt(count(s.text) + 1) * recency)
    return scores


class ExtractiveSummarizer:
    """The offline summarizer (model name ``local/extractive``).

    Args:
        keep_last: how many of the latest turns are kept verbatim (truncated
            to fit).
        token_counter: counts tokens (default: tiktoken ``cl100k_base``).
    """

    model = LOCAL_EXTRACTIVE
    remote = False

    def __init__(
        self, *, keep_last: int = 2, token_counter: Callable[[str], int] | None = None
    ) -> None:
        if isinstance(keep_last, bool) or not isinstance(keep_last, int) or keep_last < 0:
            raise ConfigurationError(
                f"keep_last={keep_last!r} must be a whole number >= 0 (turns kept verbatim)"
            )
        self.keep_last = keep_last
        self._count = token_counter

    def _counter(self) -> Callable[[str], int]:
        if self._count is None:
            from ..._format import counter_for

            self._count = counter_for(None)
        return self._count

    def summarize(
        self, transcript: Transcript, *, max_tokens: int, temperature: float | None = None
    ) -> str:
        """Select the summary from ``transcript``; ``temperature`` is ignored.

        Returns ``""`` when the transcript has no turns (compaction then
        refuses to wipe anything).
        """
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ConfigurationError(f"max_tokens={max_tokens!r} must be a whole number >= 1")
        count = self._counter()
        turns = self._turns(transcript)
        if not turns:
            return ""
        task_index, task_line = self._task(turns, transcript.user_role)
        latest_start = max(len(turns) - self.keep_last, 0)
        if task_index is not None and task_index >= latest_start:
            latest_start = task_index + 1  # the task is shown once, in its own line

        task = _truncate(task_line, max(max_tokens // 4, 1), count) if task_line else ""
        shown = [i for i in range(latest_start, len(turns)) if not turns[i].earlier_summary]
        per_turn = max(int(max_tokens * 0.35) // max(len(shown), 1), 1)
        latest = [
            _truncate(f"- {turns[i].role}: {' '.join(turns[i].text.split())}", per_turn, count)
            for i in shown
        ]

        sentences: list[_Sentence] = []
        seen: set[str] = set()
        for i, turn in enumerate(turns):
            if i == task_index or i in shown:
                continue
            for role, text in self._turn_sentences(turn):
                key = " ".join(text.lower().split())
                if key in seen or not _informative(text):
                    continue
                seen.add(key)
                sentences.append(_Sentence(len(sentences), role, text))
        scores = _scores(sentences, count)
        ranked = sorted(range(len(sentences)), key=lambda i: (-scores[i], -i))

        fixed = _render(task, [], latest)
        room = max_tokens - count(fixed) - count(KEY_POINTS) - 2
        chosen: list[int] = []
        per_sentence_cap = max(max_tokens // 4, 1)
        lines: dict[int, str] = {}
        for i in ranked:
            line = _truncate(f"- {sentences[i].role}: {sentences[i].text}", per_sentence_cap, count)
            cost = count(line) + 1
            if cost <= room:
                chosen.append(i)
                lines[i] = line
                room -= cost
        key_points = [lines[i] for i in sorted(chosen)]
        # The parts were budgeted one by one; joins can add a token here and
        # there, so drop the weakest key points until the whole fits.
        summary = _render(task, key_points, latest)
        while count(summary) > max_tokens and chosen:
            weakest = min(chosen, key=lambda i: (scores[i], i))
            chosen.remove(weakest)
            key_points = [lines[i] for i in sorted(chosen)]
            summary = _render(task, key_points, latest)
        return _truncate(summary, max_tokens, count)

    def _turns(self, transcript: Transcript) -> list[_Turn]:
        pairs: Iterable[tuple[str, str]]
        if transcript.messages:
            pairs = ((str(m.get("role", "")), _content(m)) for m in transcript.messages)
        else:
            pairs = _turns_from_text(transcript.text)
        return [turn for role, text in pairs for turn in _unpack(role, text)]

    @staticmethod
    def _task(turns: Sequence[_Turn], user_role: str | None) -> tuple[int | None, str]:
        def is_user(role: str) -> bool:
            return role == user_role if user_role else role.lower() in ("user", "human")

        for i, turn in enumerate(turns):
            if turn.earlier_summary:  # the task was compressed away before: carry it over
                for line in turn.text.splitlines():
                    if line.startswith(TASK_LABEL + " ("):
                        return None, line
            elif is_user(turn.role):
                return i, f"{TASK_LABEL} ({turn.role}): {' '.join(turn.text.split())}"
        return None, ""

    @staticmethod
    def _turn_sentences(turn: _Turn) -> Iterable[tuple[str, str]]:
        if not turn.earlier_summary:
            for sentence in _sentences(turn.text):
                yield turn.role, sentence
            return
        for line in turn.text.splitlines():
            if (
                line.startswith(TASK_LABEL + " (")
                or line in (KEY_POINTS, LATEST)
                or not line.strip()
            ):
                continue
            bullet = _BULLET_RE.match(line)
            role, text = (bullet.group(1), bullet.group(2)) if bullet else (turn.role, line)
            for sentence in _sentences(text):
                yield role, sentence

    def __repr__(self) -> str:
        return f"ExtractiveSummarizer(keep_last={self.keep_last})"


def _render(task: str, key_points: Sequence[str], latest: Sequence[str]) -> str:
    sections = []
    if task:
        sections.append(task)
    if key_points:
        sections.append("\n".join([KEY_POINTS, *key_points]))
    if latest:
        sections.append("\n".join([LATEST, *latest]))
    return "\n\n".join(sections)


def _truncate(text: str, limit: int, count: Callable[[str], int]) -> str:
    """``text`` cut (at a word boundary when possible) to at most ``limit`` tokens."""
    if count(text) <= limit:
        return text
    lo, hi = 0, len(text)  # the longest prefix length whose cut version fits
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if count(_cut(text, mid)) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return _cut(text, lo) if lo else ""


def _cut(text: str, length: int) -> str:
    prefix = text[:length]
    space = prefix.rfind(" ")
    if length < len(text) and space > length // 2:
        prefix = prefix[:space]
    return prefix.rstrip() + ELLIPSIS
