"""Durations as admins write them: ``30d``, ``12h``, ``6y``, ``forever``.

Accepted forms: a :class:`datetime.timedelta`; a number of seconds; a string
of one or more ``<integer><unit>`` parts with units ``s``, ``m`` (minutes),
``h``, ``d``, ``w`` and ``y`` (365 days), e.g. ``1y30d``; ``forever`` / ``never``
for no limit (None).

A finite duration is at most :data:`MAX_DURATION` (1000 years): retention
adds durations to now and subtracts them from it, and a ``datetime`` ends at
year 9999 and starts at year 1, so a longer one could not be used anyway.
"""

from __future__ import annotations

import datetime as _dt
import re
from typing import Annotated, Any

from pydantic import BeforeValidator, PlainSerializer

__all__ = [
    "MAX_DURATION",
    "Duration",
    "OptionalDuration",
    "format_duration",
    "parse_duration",
]

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400, "y": 365 * 86400}
_PART = re.compile(r"(\d+)\s*([smhdwy])")
_WHOLE = re.compile(r"^\s*(?:\d+\s*[smhdwy]\s*)+$")
_FOREVER = {"forever", "never", "none", "unlimited"}

MAX_DURATION = _dt.timedelta(days=1000 * 365)
"""The longest finite duration (``1000y``); ``forever`` is the way to say longer."""
_MAX_SECONDS = int(MAX_DURATION.total_seconds())
# More digits than this cannot be under the maximum in any unit (and int() of
# thousands of digits is refused by Python itself).
_MAX_DIGITS = len(str(_MAX_SECONDS))


def _too_long(value: Any) -> ValueError:
    return ValueError(
        f"duration {value!r} is longer than the maximum of 1000y (365000 days); "
        "write 'forever' for no limit"
    )


def parse_duration(value: Any) -> _dt.timedelta | None:
    """Parse one of the accepted forms; None means no limit.

    Raises:
        ValueError: naming the value and the accepted forms.
    """
    if value is None:
        return None
    if isinstance(value, _dt.timedelta):
        result = value
    elif isinstance(value, bool):
        raise ValueError(f"{value!r} is not a duration; write e.g. '30d', '12h' or 'forever'")
    elif isinstance(value, int | float):
        if value != value:  # NaN
            raise ValueError(f"{value!r} is not a duration; write e.g. '30d', '12h' or 'forever'")
        if abs(value) > _MAX_SECONDS:
            raise _too_long(value) if value > 0 else _negative(value)
        result = _dt.timedelta(seconds=value)
    elif isinstance(value, str):
        text = value.strip().lower()
        if text in _FOREVER:
            return None
        if not _WHOLE.match(text):
            raise ValueError(
                f"{value!r} is not a duration; write <number><unit> with units s, m, h, d, w, y "
                "(e.g. '30d', '6y', '1d12h') or 'forever'"
            )
        parts = _PART.findall(text)
        if any(len(n.lstrip("0")) > _MAX_DIGITS for n, _ in parts):
            raise _too_long(value)
        seconds = sum(int(n) * _UNITS[u] for n, u in parts)
        if seconds > _MAX_SECONDS:
            raise _too_long(value)
        result = _dt.timedelta(seconds=seconds)
    else:
        raise ValueError(f"{value!r} is not a duration; write e.g. '30d', '12h' or 'forever'")
    if result < _dt.timedelta(0):
        raise _negative(value)
    if result > MAX_DURATION:
        raise _too_long(value)
    return result


def _negative(value: Any) -> ValueError:
    return ValueError(f"duration {value!r} is negative; durations must be >= 0")


def format_duration(value: _dt.timedelta | None) -> str:
    """The shortest ``<n><unit>`` spelling of ``value`` (``forever`` for None)."""
    if value is None:
        return "forever"
    seconds = int(value.total_seconds())
    if seconds == 0:
        return "0s"
    parts = []
    for unit in ("y", "d", "h", "m", "s"):
        size = _UNITS[unit]
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return "".join(parts)


def _required(value: Any) -> _dt.timedelta:
    parsed = parse_duration(value)
    if parsed is None:
        raise ValueError(f"{value!r}: a finite duration is required here, not 'forever'")
    return parsed


Duration = Annotated[
    _dt.timedelta,
    BeforeValidator(_required),
    PlainSerializer(format_duration, return_type=str),
]
"""A finite duration field."""

OptionalDuration = Annotated[
    _dt.timedelta | None,
    BeforeValidator(parse_duration),
    PlainSerializer(format_duration, return_type=str),
]
"""A duration field where ``forever`` (None) means no limit."""
