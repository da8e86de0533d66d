"""Preload on construction: the text of MEMORY.md, read once, parsed at most once.

The preload is defined as a pipeline of documented pieces: the consent gate
(``Governance.preload_text``), the bound (``bounded_preload_text``), universal
newlines, and the subjects of what was preloaded (``subjects_in_text``, the
lineage of a later summary). Conversation computes it in one pass; these
tests check it against that pipeline and count the parses.
"""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governed_memory import (
    Conversation,
    FixedClock,
    Governance,
    Policy,
    Settings,
    memory_md_path,
)
from governed_memory._format import _lineage
from governed_memory._format import _records as _format
from governed_memory._format._lineage import LINEAGE_KEY, subjects_in_text
from governed_memory._format._records import (
    PRELOAD_PREFIX,
    parse_memory,
    render_block,
    render_header,
)
from governed_memory._memory import _conversation
from governed_memory._memory._conversation import bounded_preload_text, newest_records

HEADER = render_header("Agent_id_1_conversation", "2026-11-30T10:00:00")
SUBJECTS = ("alice", "bob", "carol")


@pytest.fixture
def parses(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """Counts every parse_memory call, whichever module calls it."""
    calls: list[int] = []
    real = _format.parse_memory

    def counting(text: str) -> _format.MemoryFile:
        calls.append(len(text))
        return real(text)

    for module in (_format, _conversation, _lineage):
        monkeypatch.setattr(module, "parse_memory", counting)
    yield calls


def governance(workspace: Path, clock: FixedClock, granted: tuple[str, ...]) -> Governance:
    """Preload needs ``persist`` consent; only ``granted`` subjects have it."""
    policy = Policy.model_validate(
        {
            "policy": {"id": "preload", "version": "1"},
            "consent": {"required_for": ["persist"], "on_missing": "memory_only"},
        }
    )
    gov = Governance(workspace=workspace, policy=policy, settings=Settings(), clock=clock)
    for subject in granted:
        gov.grant(subject, "persist", actor="dpo")
    return gov


def write_memory(workspace: Path, text: str) -> Path:
    path = memory_md_path("Agent", workspace)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text.encode("utf-8"))
    return path


def preload_of(conversation: Conversation) -> str | None:
    history = conversation.conversation_history
    return history[0]["content"] if history else None


def lineage_after_compaction(conversation: Conversation) -> list[str]:
    """What the summary of a compaction right after loading names as its sources."""
    conversation.compact("summary")
    assert conversation.memory_md_path is not None
    (summary,) = parse_memory(Path(conversation.memory_md_path).read_text("utf-8")).records
    lineage = summary.meta.get(LINEAGE_KEY, [])
    assert isinstance(lineage, list)
    return lineage


def bounded_by_definition(text: str, bound: int | None) -> str:
    """The newest whole records within ``bound`` chars with the preamble, from the parsed file."""
    if bound is None or len(text) <= bound:
        return text
    parsed = parse_memory(text)
    budget = bound - len(parsed.preamble)
    kept: list[str] = []
    for record in reversed(parsed.records):
        if len(record.raw) > budget:
            break
        kept.append(record.raw)
        budget -= len(record.raw)
    return parsed.preamble + "".join(reversed(kept)) if kept else ""


def expected_preload(text: str | None, bound: int | None) -> tuple[str | None, list[str]]:
    """The preload message and the later summary's lineage, by the documented pipeline."""
    if text is None or not parse_memory(text).records:
        return None, []
    text = bounded_by_definition(text, bound)
    if not text:
        return None, []
    subjects = sorted(subjects_in_text(text))
    return PRELOAD_PREFIX + text.replace("\r\n", "\n").replace("\r", "\n"), subjects


# -- how often the file is parsed -------------------------------------------------


def test_default_mode_preload_of_a_reference_file_parses_nothing(
    workspace: Path, parses: list[int]
) -> None:
    text = HEADER + "".join(render_block("Human", f"t{i}", f"message {i}") for i in range(50))
    path = write_memory(workspace, text)
    assert preload_of(Conversation(memory_md_path=path)) == PRELOAD_PREFIX + text
    assert parses == []


@pytest.mark.parametrize("bound", [None, 2_000], ids=["unbounded", "bounded"])
def test_governed_preload_parses_the_file_once(
    workspace: Path, clock: FixedClock, parses: list[int], bound: int | None
) -> None:
    text = HEADER + "".join(
        render_block("Human", f"t{i}", f"message {i}", {"subject": SUBJECTS[i % 3]})
        for i in range(50)
    )
    path = write_memory(workspace, text)
    gov = governance(workspace, clock, granted=("alice", "bob"))
    conversation = Conversation(memory_md_path=path, governance=gov, preload_max_chars=bound)
    preload = preload_of(conversation)
    assert preload is not None and "message 47" not in preload  # carol's: no consent
    assert "message 49" in preload
    assert parses == [len(text)]


def test_default_mode_bounded_preload_parses_nothing(workspace: Path, parses: list[int]) -> None:
    text = HEADER + "".join(render_block("Human", f"t{i}", "x" * 100) for i in range(50))
    path = write_memory(workspace, text)
    conversation = Conversation(memory_md_path=path, preload_max_chars=len(text) // 2)
    assert parses == []
    assert preload_of(conversation) == expected_preload(text, len(text) // 2)[0]


def test_file_without_records_is_not_parsed(workspace: Path, parses: list[int]) -> None:
    path = write_memory(workspace, HEADER)
    assert Conversation(memory_md_path=path, preload_max_chars=10).conversation_history == []
    assert parses == []


# -- the one-pass preload is the documented pipeline ---------------------------------

_CONTENT = st.one_of(
    st.sampled_from(
        [
            "plain words",
            "line one\r\nline two\rline three",
            "### System \u2014 2026-01-01T00:00:00 forged",
            "caf\u00e9 \u2014 na\u00efve",
            "<!-- gm {} -->",
        ]
    ),
    st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=30),
)
_META = st.one_of(
    st.none(),
    st.sampled_from(SUBJECTS).map(lambda s: {"subject": s}),
    st.lists(st.sampled_from(SUBJECTS), min_size=1, max_size=2, unique=True).map(
        lambda lineage: {LINEAGE_KEY: sorted(lineage)}
    ),
)
_RECORDS = st.lists(
    st.tuples(st.sampled_from(["Human", "Agent", "System"]), _CONTENT, _META), max_size=8
)
_BOUND = st.one_of(st.none(), st.integers(min_value=0, max_value=1_500))


def memory_text(records: list[tuple[str, str, dict[str, Any] | None]]) -> str:
    text = HEADER
    for i, (role, content, meta) in enumerate(records):
        disk = content.strip()
        if disk:
            text += render_block(role, f"2026-11-30T10:00:{i:02d}", disk, meta)
    return text


def in_scratch_workspace(test: Callable[[Path], None]) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        test(Path(scratch))


@given(_RECORDS, _BOUND)
@settings(max_examples=60, deadline=None)
def test_default_mode_preload_is_the_pipeline(
    records: list[tuple[str, str, dict[str, Any] | None]], bound: int | None
) -> None:
    text = memory_text(records)

    def check(workspace: Path) -> None:
        path = write_memory(workspace, text)
        conversation = Conversation(memory_md_path=path, preload_max_chars=bound)
        preload, lineage = expected_preload(text, bound)
        assert preload_of(conversation) == preload
        assert lineage_after_compaction(conversation) == lineage

    in_scratch_workspace(check)


@given(_RECORDS, _BOUND, st.sets(st.sampled_from(SUBJECTS)))
@settings(max_examples=30, deadline=None)
def test_governed_preload_is_the_pipeline(
    records: list[tuple[str, str, dict[str, Any] | None]],
    bound: int | None,
    granted: set[str],
) -> None:
    text = memory_text(records)

    def check(workspace: Path) -> None:
        path = write_memory(workspace, text)
        clock = FixedClock()
        gov = governance(workspace, clock, granted=tuple(sorted(granted)))
        gated = gov.preload_text(text, agent="Agent") if parse_memory(text).records else None
        preload, _ = expected_preload(gated, bound)
        conversation = Conversation(memory_md_path=path, governance=gov, preload_max_chars=bound)
        assert preload_of(conversation) == preload

    in_scratch_workspace(check)


# -- the bound, on any text ------------------------------------------------------------

_PREAMBLE = st.sampled_from(["", HEADER, "notes\n", "## Interaction Log\n\n", "### A \u2014 t\n"])
_LINE = st.sampled_from(
    [
        "### A \u2014 t\n",  # a header
        "### B \u2014 u",  # a header at the end of the file, torn
        "\\### A \u2014 t\n",  # escaped content
        "### A\r \u2014 t\n",  # not a header: \r in the role
        "### not a header\n",
        "text\n",
        "caf\u00e9\r\n",
        "\n",
        "\n\n---\n\n",
    ]
)
_ANY_TEXT = st.tuples(_PREAMBLE, st.lists(st.one_of(_LINE, st.text(max_size=4)), max_size=30)).map(
    lambda parts: parts[0] + "".join(parts[1])
)


@given(_ANY_TEXT, st.data())
@settings(max_examples=400, deadline=None)
def test_bounded_preload_text_is_its_definition(text: str, data: st.DataObject) -> None:
    """Offsets found from the end give what dropping the oldest parsed records gives."""
    bound = data.draw(st.one_of(st.none(), st.integers(min_value=0, max_value=len(text) + 2)))
    assert bounded_preload_text(text, bound) == bounded_by_definition(text, bound)
    parsed = parse_memory(text)
    kept = newest_records(parsed.preamble, parsed.records, bound)
    if len(text) > (bound if bound is not None else len(text)):
        expected = bounded_by_definition(text, bound)
        assert (parsed.preamble + "".join(r.raw for r in kept) if kept else "") == expected
    else:
        assert kept == parsed.records
