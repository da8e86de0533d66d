"""docs/agent.md states the Agent's retry behaviour with the parameters the code uses."""

from __future__ import annotations

from pathlib import Path

import governed_memory
from governed_memory._memory._agent import _FINAL_STATUS, RETRY_WAIT_FIRST, RETRY_WAIT_MAX

DOCS = Path(governed_memory.__file__).parent.parent / "docs" / "agent.md"


def _retries() -> str:
    text = DOCS.read_text(encoding="utf-8")
    assert "### Retries" in text, "docs/agent.md has no Retries section"
    return text.split("### Retries", 1)[1].split("\n### ", 1)[0]


def test_the_backoff_bounds_are_the_code_s() -> None:
    section = _retries()
    assert "tenacity" in section and "full jitter" in section
    assert f"{RETRY_WAIT_FIRST:g} s" in section and f"{RETRY_WAIT_MAX:g} s" in section


def test_every_status_that_is_not_retried_is_named() -> None:
    section = _retries()
    assert [status for status in sorted(_FINAL_STATUS) if str(status) not in section] == []


def test_retry_sleep_is_documented_for_tests() -> None:
    assert "retry_sleep" in _retries()
