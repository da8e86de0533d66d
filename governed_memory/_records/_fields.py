"""Typed fields of a stored record: a wrong-typed field is a damaged file, named, never a KeyError.

Every reader of a governance record takes its fields through :class:`Fields`,
so a file edited by hand or damaged (``"records": "many"``, ``"scope": 5``,
a missing key) raises one :class:`~governed_memory.StorageError` that names
the file, the field, what was found, what was expected and the fix, for
library callers and the CLI alike, instead of a KeyError, TypeError or
AttributeError from deep inside.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Collection
from typing import Any

from .._errors import StorageError

__all__ = ["Fields", "damaged"]

_MISSING = object()
_FIX = "the file is damaged or was edited; restore it from a backup"
_SHOWN = 60


def damaged(where: str, field: str, value: object, expected: str) -> StorageError:
    """The error of a field that is not what the format says (``value`` _MISSING: absent)."""
    if value is _MISSING:
        found = "missing"
    else:
        shown = repr(value)
        shown = shown if len(shown) <= _SHOWN else shown[:_SHOWN] + "…"
        found = f"{shown} ({type(value).__name__})"
    what = f"field {field!r}" if field else "the record"
    return StorageError(f"{where}: {what} is {found}, expected {expected}; {_FIX}")


class Fields:
    """The fields of one stored JSON object, each read with the type the format gives it.

    Args:
        data: the parsed object (anything: not an object is itself reported).
        where: names the file (and line) in messages.
        prefix: the path of this object inside the record (``files[0].``).
    """

    def __init__(self, data: object, where: str, prefix: str = "") -> None:
        if not isinstance(data, dict):
            raise damaged(where, prefix.rstrip("."), data, "a JSON object")
        self.data: dict[str, Any] = data
        self.where = where
        self.prefix = prefix

    def _get(self, name: str, default: object) -> object:
        value = self.data.get(name, default)
        if value is _MISSING:
            raise damaged(self.where, self.prefix + name, _MISSING, "a value")
        return value

    def _bad(self, name: str, value: object, expected: str) -> StorageError:
        return damaged(self.where, self.prefix + name, value, expected)

    def text(self, name: str, *, choices: Collection[str] = ()) -> str:
        value = self._get(name, _MISSING)
        if not isinstance(value, str) or (choices and value not in choices):
            expected = f"one of {', '.join(map(repr, sorted(choices)))}" if choices else "text"
            raise self._bad(name, value, expected)
        return value

    def optional_text(self, name: str) -> str | None:
        value = self._get(name, None)
        if value is not None and not isinstance(value, str):
            raise self._bad(name, value, "text or null")
        return value

    def version_text(self, name: str) -> str:
        """Text, or a number some writers stored (a policy version): as text."""
        value = self._get(name, _MISSING)
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise self._bad(name, value, "text")
        return str(value)

    def time(self, name: str) -> str:
        """An ISO 8601 time, as stored (writers add the UTC offset; readers take local time without)."""
        value = self.text(name)
        try:
            _dt.datetime.fromisoformat(value)
        except ValueError:
            raise self._bad(name, value, "an ISO 8601 time") from None
        return value

    def count(self, name: str) -> int:
        value = self._get(name, _MISSING)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise self._bad(name, value, "a whole number, 0 or more")
        return value

    def flag(self, name: str, default: bool = False) -> bool:
        value = self._get(name, default)
        if not isinstance(value, bool):
            raise self._bad(name, value, "true or false")
        return value

    def texts(self, name: str) -> tuple[str, ...]:
        value = self._get(name, [])
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise self._bad(name, value, "a list of texts")
        return tuple(value)

    def nested(self, name: str) -> Fields:
        """The fields of the JSON object ``name`` (its errors name ``name.<field>``)."""
        return Fields(self._get(name, _MISSING), self.where, f"{self.prefix}{name}.")

    def optional_record(self, name: str) -> dict[str, Any] | None:
        value = self._get(name, None)
        if value is not None and not isinstance(value, dict):
            raise self._bad(name, value, "a JSON object or null")
        return value

    def records(self, name: str) -> list[Fields]:
        value = self._get(name, [])
        if not isinstance(value, list):
            raise self._bad(name, value, "a list of JSON objects")
        return [Fields(v, self.where, f"{self.prefix}{name}[{i}].") for i, v in enumerate(value)]

    def only(self, names: Collection[str]) -> None:
        """Refuse a field the format does not have (it would be dropped on the next write)."""
        for name in self.data:
            if name not in names:
                raise self._bad(name, self.data[name], f"no such field (one of {sorted(names)})")
