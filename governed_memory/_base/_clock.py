"""Where governed_memory reads the time.

Timestamps in MEMORY.md and archive names are naive local time, exactly as the
reference writes them (``datetime.now().isoformat()``). Every component that
depends on time takes a :class:`Clock`, so tests and ``--as-of`` runs can pin it.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Callable
from time import time_ns as _time_ns

from .._protocols import Clock  # the protocol, documented once there; re-exported

__all__ = ["Clock", "FixedClock", "SystemClock", "iso_now"]


class SystemClock:
    """The machine's clock (naive local time, as the reference uses)."""

    def __init__(self) -> None:
        # The current second (in microseconds since the epoch) and its local
        # ISO text: replaced as one tuple, so threads never see a mix.
        self._second: tuple[int, str] = (-(10**18), "")  # far from any clock reading

    def now(self) -> _dt.datetime:
        return _dt.datetime.now()

    def now_iso(self) -> str:
        """``now().isoformat()`` in half the time (every ``Conversation.add`` stamps one).

        The same clock read (``time.time_ns``, as ``datetime.now``) and the
        same text: microseconds floored, no fraction when they are 0. The date
        and time of day are formatted once per second (local time is
        recomputed for every new second, so DST changes land on time).
        """
        us = _time_ns() // 1000
        start, prefix = self._second
        frac = us - start
        if 0 < frac < 1_000_000:
            return f"{prefix}.{frac:06d}"
        second = us // 1_000_000
        prefix = _dt.datetime.fromtimestamp(second).isoformat()
        self._second = (second * 1_000_000, prefix)
        frac = us - second * 1_000_000
        return f"{prefix}.{frac:06d}" if frac else prefix


def iso_now(clock: Clock) -> Callable[[], str]:
    """A function returning ``clock.now().isoformat()``.

    :meth:`SystemClock.now_iso` when that is the same thing (not for a
    subclass that overrides ``now``).
    """
    if isinstance(clock, SystemClock) and type(clock).now is SystemClock.now:
        return clock.now_iso
    return lambda: clock.now().isoformat()


class FixedClock:
    """A clock that only moves when told to; for tests and simulations.

    Args:
        start: the time ``now()`` returns until :meth:`advance` or :meth:`set`.
        tick: added after every ``now()`` call, so successive timestamps
            differ (0 keeps the time frozen).
    """

    def __init__(
        self,
        start: _dt.datetime | None = None,
        tick: _dt.timedelta = _dt.timedelta(0),
    ) -> None:
        self._now = start or _dt.datetime(2026, 1, 1, 12, 0, 0)
        self._tick = tick

    def now(self) -> _dt.datetime:
        current = self._now
        self._now = current + self._tick
        return current

    def advance(self, delta: _dt.timedelta) -> None:
        """Move the clock forward by ``delta``."""
        self._now += delta

    def set(self, when: _dt.datetime) -> None:
        """Jump to ``when``."""
        self._now = when
