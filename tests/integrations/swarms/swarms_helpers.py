"""Helpers of the swarms integration tests (a module of its own name: tests/ has two conftests)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

MODEL = "openai/stub"
SWARMS_WARNINGS = "ignore:Pydantic serializer warnings:UserWarning"
"""litellm 1.76 (swarms' pin) warns while serialising the stub's replies; as an error it fails the call."""
SUMMARIZER_MARK = "conversation compression expert"  # in swarms' compression system prompt
CANARY = "IBAN DE89 3704 0044 0532 0130 00"
"""Personal data the regulated tests look for on disk, in exports and in live memory."""

_TS = re.compile(r"\d{4}-\d\d-\d\d[T_]\d\d[:-]\d\d[:-]\d\d(?:\.\d+)?")
_ID = re.compile(r"agent-[0-9a-f]{32}|[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def normalise(text: str) -> str:
    """Timestamps and generated ids replaced, for comparing two runs."""
    return _ID.sub("<id>", _TS.sub("<ts>", text))


def tree(root: Path) -> dict[str, str | None]:
    """Every path under ``root`` (names and contents normalised)."""
    return {
        normalise(str(p.relative_to(root))): (
            normalise(p.read_text(encoding="utf-8")) if p.is_file() else None
        )
        for p in sorted(root.rglob("*"))
    }


def all_bytes(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def consented(agent: Any, *purposes: str) -> Any:
    """``agent`` with its subject's consent to ``purposes`` granted."""
    for purpose in purposes:
        agent.governance.grant(agent.subject_id, purpose, actor="test")
    return agent


def is_summary_request(body: dict[str, Any]) -> bool:
    return SUMMARIZER_MARK in str(body["messages"][0]["content"])
