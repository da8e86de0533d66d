"""The subject-isolation example in docs/conversation.md runs, and does what its comments say."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from governed_memory import parse_memory

DOC = Path(__file__).resolve().parents[2] / "docs" / "conversation.md"


def _example(name: str) -> str:
    text = DOC.read_text(encoding="utf-8")
    found = re.search(rf"<!-- example: {name} -->\n```python\n(.*?)```", text, re.S)
    assert found, f"docs/conversation.md has no example {name!r}"
    return found.group(1)


def test_the_subject_isolation_example_keeps_each_customer_in_their_own_memory(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WORKSPACE_DIR", str(workspace))
    namespace: dict[str, Any] = {}
    exec(compile(_example("subject-isolation"), str(DOC), "exec"), namespace)
    alice = namespace["alice"]
    assert alice.conversation_history[-1]["subject_id"] == "C-2077"
    assert alice.conversation_history[-2]["lineage"] == ["C-1042"]
    subjects = workspace / "agents" / "Teller" / "subjects"
    memories = {
        folder.name: [r.content for r in parse_memory((folder / "MEMORY.md").read_text()).records]
        for folder in subjects.iterdir()
    }
    assert sorted(memories.values()) == [["C-1042 gave her IBAN."], ["I am her husband."]]
