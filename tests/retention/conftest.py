"""Fixtures of the retention tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from governed_memory import Governance


@pytest.fixture
def governances() -> Iterator[list[Governance]]:
    """The Governances a test builds (append each), their storage closed at the end."""
    made: list[Governance] = []
    yield made
    for gov in made:
        gov.storage.close()
