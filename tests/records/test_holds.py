"""Legal holds: placing, releasing, listing, persistence, concurrency and bad input.

Every test runs on the plaintext holds file and on the sealed one (encryption at rest).
"""

from __future__ import annotations

import datetime as dt
import json
import multiprocessing
from pathlib import Path

import pytest
from sealing_helpers import RecordMode

from governed_memory import FixedClock
from governed_memory._crypto._sealing import HOLDS_PURPOSE
from governed_memory._errors import ConfigurationError, FormatVersionError, StorageError
from governed_memory._records._holds import HOLDS_FILE, HoldNotFoundError, HoldRegistry


@pytest.fixture
def gov(tmp_path: Path) -> Path:
    return tmp_path / "ws" / ".governed_memory"


def registry(gov: Path, mode: RecordMode, **kw: object) -> HoldRegistry:
    clock = FixedClock(dt.datetime(2026, 5, 1, 9, 0).astimezone())
    return HoldRegistry(gov, clock=clock, sealing=mode.sealing(), **kw)  # type: ignore[arg-type]


def fresh(gov: Path, mode: RecordMode) -> HoldRegistry:
    """Another registry on the same file (as another process would open it)."""
    return HoldRegistry(gov, sealing=mode.sealing())


def test_reading_creates_nothing(gov: Path, record_mode: RecordMode) -> None:
    holds = registry(gov, record_mode)
    assert holds.holds() == [] and not holds.is_held(agent="a")
    assert not gov.exists()


def test_place_is_durable_and_visible_to_a_new_registry(gov: Path, record_mode: RecordMode) -> None:
    hold = registry(gov, record_mode).place(
        agent="Quant", reason="case 2026-114", actor="legal@bank"
    )
    again = fresh(gov, record_mode).holds()
    assert again == [hold]
    raw = (gov / HOLDS_FILE).read_bytes()
    record_mode.check_form(raw)
    assert (b"case 2026-114" in raw) is not record_mode.sealed
    assert (hold.agent, hold.reason, hold.placed_by) == ("Quant", "case 2026-114", "legal@bank")
    assert hold.placed_at.startswith("2026-05-01T09:00:00")
    assert (gov / HOLDS_FILE).stat().st_mode & 0o777 == 0o600


def test_is_held_matches_agent_or_subject(gov: Path, record_mode: RecordMode) -> None:
    holds = registry(gov, record_mode)
    holds.place(agent="A", reason="r", actor="x")
    holds.place(subject="alice", reason="r", actor="x")
    assert holds.is_held(agent="A")
    assert holds.is_held(subject="alice")
    assert holds.is_held(agent="B", subject="alice")
    assert not holds.is_held(agent="B", subject="bob")
    assert not holds.is_held()


def test_release_by_target_keeps_the_history(gov: Path, record_mode: RecordMode) -> None:
    holds = registry(gov, record_mode)
    placed = holds.place(subject="alice", reason="r", actor="legal")
    released = holds.release(subject="alice", actor="dpo", reason="case closed")
    assert released.id == placed.id and not released.active
    assert (released.released_by, released.release_reason) == ("dpo", "case closed")
    assert holds.holds() == []
    assert holds.holds(include_released=True) == [released]
    assert not holds.is_held(subject="alice")


def test_release_with_several_holds_needs_an_id(gov: Path, record_mode: RecordMode) -> None:
    holds = registry(gov, record_mode)
    first = holds.place(agent="A", reason="case 1", actor="x")
    second = holds.place(agent="A", reason="case 2", actor="x")
    with pytest.raises(ConfigurationError, match="2 active holds") as err:
        holds.release(agent="A", actor="x")
    assert first.id in str(err.value) and second.id in str(err.value)
    holds.release(hold_id=first.id, actor="x")
    assert [h.id for h in holds.holds()] == [second.id]
    assert holds.is_held(agent="A")


def test_release_of_nothing_is_not_found(gov: Path, record_mode: RecordMode) -> None:
    with pytest.raises(HoldNotFoundError, match="no active hold with agent 'A'"):
        registry(gov, record_mode).release(agent="A", actor="x")
    assert isinstance(HoldNotFoundError("x"), LookupError)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"reason": "r", "actor": "x"}, "exactly one agent or one subject"),
        ({"agent": "A", "subject": "s", "reason": "r", "actor": "x"}, "exactly one"),
        ({"agent": "../x", "reason": "r", "actor": "x"}, "path separator"),
        ({"agent": "A", "reason": "  ", "actor": "x"}, "reason"),
        ({"agent": "A", "reason": "r", "actor": ""}, "actor"),
        ({"agent": "A", "reason": "a\x00b", "actor": "x"}, "control characters"),
    ],
)
def test_bad_holds_are_refused_and_nothing_is_written(
    gov: Path, record_mode: RecordMode, kwargs: dict[str, str], message: str
) -> None:
    with pytest.raises(ConfigurationError, match=message):
        registry(gov, record_mode).place(**kwargs)  # type: ignore[arg-type]
    assert not (gov / HOLDS_FILE).exists()


def test_events_are_reported_after_each_change(gov: Path, record_mode: RecordMode) -> None:
    seen: list[tuple[str, dict[str, object]]] = []
    holds = registry(
        gov, record_mode, on_event=lambda name, attrs: seen.append((name, dict(attrs)))
    )
    hold = holds.place(agent="A", reason="r", actor="legal")
    holds.release(hold_id=hold.id, actor="dpo")
    assert [name for name, _ in seen] == ["hold.place", "hold.release"]
    assert seen[0][1]["hold_id"] == hold.id and seen[1][1]["actor"] == "dpo"


def test_a_failed_write_leaves_the_previous_holds(
    gov: Path, record_mode: RecordMode, monkeypatch: pytest.MonkeyPatch
) -> None:
    holds = registry(gov, record_mode)
    kept = holds.place(agent="A", reason="r", actor="x")
    import governed_memory._records._place as module  # where the holds file is written

    def broken(path: Path, data: bytes) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(module, "atomic_write", broken)
    with pytest.raises(StorageError, match="NOT changed"):
        holds.place(agent="B", reason="r", actor="x")
    monkeypatch.undo()
    assert fresh(gov, record_mode).holds() == [kept]


def test_unknown_format_version_is_refused(gov: Path, record_mode: RecordMode) -> None:
    doc = json.dumps({"v": 99, "holds": []}).encode()
    record_mode.write_file(gov / HOLDS_FILE, HOLDS_PURPOSE, HOLDS_FILE, doc)
    with pytest.raises(FormatVersionError, match="version 99"):
        fresh(gov, record_mode).holds()


def test_damaged_file_is_a_storage_error(gov: Path, record_mode: RecordMode) -> None:
    record_mode.write_file(gov / HOLDS_FILE, HOLDS_PURPOSE, HOLDS_FILE, b"{not json")
    with pytest.raises(StorageError, match="not valid JSON"):
        fresh(gov, record_mode).is_held(agent="A")


def _place_many(gov: str, worker: int, mode: RecordMode) -> None:
    holds = HoldRegistry(Path(gov), sealing=mode.sealing())
    for i in range(10):
        holds.place(agent=f"a{worker}-{i}", reason="r", actor=f"w{worker}")


def test_concurrent_processes_never_lose_a_hold(gov: Path, record_mode: RecordMode) -> None:
    ctx = multiprocessing.get_context("spawn")  # fork with live threads is unsafe
    procs = [ctx.Process(target=_place_many, args=(str(gov), w, record_mode)) for w in range(4)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(60)
        assert p.exitcode == 0
    assert len(fresh(gov, record_mode).holds()) == 40
