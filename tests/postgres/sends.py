"""What the tests of one-round-trip transactions (``Database.pipelined``) share."""

from __future__ import annotations

from typing import Any

import pytest

from governed_memory._postgres import Database


def lose_the_next_send(db: Database, monkeypatch: pytest.MonkeyPatch, *, committed: bool) -> None:
    """The next one-round-trip transaction runs (``committed``) or not, then reports the
    connection lost after the send, so that its outcome is unknown to the caller."""
    real = db.pipelined
    calls: list[int] = []

    def lost(*args: Any, **kwargs: Any) -> list[int] | None:
        calls.append(1)
        if len(calls) > 1:
            return real(*args, **kwargs)
        if committed:
            real(*args, **kwargs)
        return None

    monkeypatch.setattr(db, "pipelined", lost)
