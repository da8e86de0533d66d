"""Text no record can store is refused at the entry points, never a UnicodeEncodeError (issue 13).

A lone surrogate (what ``os.fsdecode`` makes of an undecodable byte) or a
NUL in a subject id, actor or reason: a ConfigurationError naming the value,
the rule and the fix, before anything is written.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from governed_memory import ConfigurationError, FixedClock, Governance
from governed_memory._records import HoldRegistry, validate_subject_id, validate_text
from governed_memory._subjects import erase, schedule_erasure

BAD = ["S\udc80", "\ud800", "a\x00b"]


def _refused(call: Callable[[], object], value: str) -> str:
    with pytest.raises(ConfigurationError) as caught:
        call()
    message = str(caught.value)
    assert repr(value)[:4] in message  # the value, quoted (a long one is cut)
    if "\x00" in value:  # refused with the other control characters, in the caller's words
        assert any(rule in message for rule in ("without NUL", "control characters", "single-line"))
    else:
        assert "UTF-8 text without NUL or lone surrogates" in message
        assert "lone surrogate" in message and repr(value) in message
    return message


@pytest.mark.parametrize("value", BAD)
def test_validate_text_names_value_rule_and_fix(value: str) -> None:
    message = _refused(lambda: validate_text("actor", value, fix="give a name"), value)
    assert message.startswith("actor ") and "give a name" in message


def test_validate_text_accepts_any_other_text() -> None:
    assert validate_text("reason", "ticket 42 — café ✓ 😀", fix="") == "ticket 42 — café ✓ 😀"


@pytest.mark.parametrize("value", BAD)
def test_a_subject_id_that_is_not_utf8_text_is_refused(value: str) -> None:
    _refused(lambda: validate_subject_id(value), value)


@pytest.mark.parametrize("value", BAD)
def test_the_registries_writers_refuse_it_and_write_nothing(
    workspace: Path, clock: FixedClock, value: str
) -> None:
    gov = Governance(workspace=workspace, clock=clock)
    holds = HoldRegistry(gov.governance_dir, clock=clock)
    calls: list[Callable[[], object]] = [
        lambda: gov.grant(value, "persist", actor="dpo"),
        lambda: gov.withdraw(value, "persist", actor="dpo"),
        lambda: gov.grant("alice", "persist", actor=value),
        lambda: holds.place(subject=value, reason="case", actor="legal"),
        lambda: holds.place(agent="A", reason=value, actor="legal"),
        lambda: holds.place(agent="A", reason="case", actor=value),
        lambda: erase(gov, subject=value),
        lambda: erase(gov, subject="alice", reason=value),
        lambda: erase(gov, subject="alice", actor=value),
        lambda: schedule_erasure(gov, subject=value, grace="1d"),
        lambda: schedule_erasure(gov, subject="alice", grace="1d", reason=value),
        lambda: schedule_erasure(gov, subject="alice", grace="1d", actor=value),
    ]
    for call in calls:
        _refused(call, value)
    governance = gov.governance_dir
    written = (
        sorted(p.name for p in governance.rglob("*") if p.is_file()) if governance.exists() else []
    )
    assert [n for n in written if not n.endswith(".lock") and n != "audit.jsonl"] == []
