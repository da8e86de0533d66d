"""Where governed_memory reads the time.

Timestamps in MEMORY.md and archive names are naive local time, exactly as the
reference writes them (``datetime.now().isoformat()``). Every component that
depends on time takes a :class:`Clock`, so tests and ``--as-of`` runs can pin it.
"""

from __future__ import annotations

import datetime as _dt
from typing import Protocol

__all__ = ["Clock", "FixedClock", "SystemClock"]


class Clock(Protocol):
    """A source of the current time. Implement ``now`` to inject your own."""

    def now(self) -> _dt.datetime:
        """Return the current naive local time."""
        ...


class SystemClock:
    """The machine's clock (naive local time, as the reference uses)."""

    def now(self) -> _dt.datetime:
        return _dt.datetime.now()


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
