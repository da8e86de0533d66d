"""Clocks: the system clock's fast ISO text is datetime.now().isoformat(), exactly."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governed_memory import FixedClock, SystemClock
from governed_memory._base import _clock as clock_module
from governed_memory._base._clock import iso_now


def _at(monkeypatch: pytest.MonkeyPatch, ns: int) -> None:
    monkeypatch.setattr(clock_module, "_time_ns", lambda: ns)


@settings(max_examples=200)
@given(ns=st.integers(min_value=0, max_value=4_000_000_000 * 10**9))
def test_now_iso_is_the_isoformat_of_the_same_instant(ns: int) -> None:
    clock = SystemClock()
    with pytest.MonkeyPatch.context() as mp:
        _at(mp, ns)
        text = clock.now_iso()
    # datetime.now() floors the clock to the microsecond, as fromtimestamp of
    # the integer seconds plus a microsecond field does.
    seconds, us = divmod(ns // 1000, 1_000_000)
    assert text == dt.datetime.fromtimestamp(seconds).replace(microsecond=us).isoformat()


def test_now_iso_reuses_the_second_and_follows_the_next(monkeypatch: pytest.MonkeyPatch) -> None:
    clock = SystemClock()
    base = int(dt.datetime(2026, 3, 29, 1, 59, 59).timestamp()) * 10**9
    expected = []
    for offset_ns in (0, 1_000, 999_999_000, 1_000_000_000, 1_000_001_000, 3_600 * 10**9):
        _at(monkeypatch, base + offset_ns)
        expected.append(clock.now_iso())
    assert expected[0].endswith(":59")  # no fraction at microsecond 0, as isoformat()
    assert expected[1].endswith(":59.000001")
    assert expected[2].endswith(":59.999999")
    assert expected[3] == dt.datetime.fromtimestamp((base + 10**9) // 10**9).isoformat()
    assert expected[4] == expected[3] + ".000001"
    assert expected[5] == dt.datetime.fromtimestamp(base // 10**9 + 3_600).isoformat()


def test_now_iso_reads_the_real_clock() -> None:
    before = dt.datetime.now()
    text = SystemClock().now_iso()
    after = dt.datetime.now()
    assert before <= dt.datetime.fromisoformat(text) <= after


def test_iso_now_uses_the_fast_text_only_for_the_plain_system_clock() -> None:
    system = SystemClock()
    assert iso_now(system) == system.now_iso

    class Shifted(SystemClock):
        def now(self) -> dt.datetime:
            return dt.datetime(2000, 1, 1, 0, 0, 0, 5)

    assert iso_now(Shifted())() == "2000-01-01T00:00:00.000005"
    fixed = FixedClock(dt.datetime(2026, 1, 1, 12, 0, 0))
    assert iso_now(fixed)() == "2026-01-01T12:00:00"
