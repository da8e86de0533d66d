"""The extension points a user plugs in: a clock (more join it as they move here).

Each is a :class:`typing.Protocol`, documented here once; the shipped
implementations (``SystemClock``, ``FixedClock``) satisfy it structurally and
keep living beside the code that uses them.
"""

from __future__ import annotations

import datetime as _dt
from typing import Protocol

__all__ = ["Clock"]


class Clock(Protocol):
    """A source of the current time. Implement ``now`` to inject your own."""

    def now(self) -> _dt.datetime:
        """Return the current naive local time."""
        ...
