"""The worked example of docs/integrations.md ("OpenAI Agents SDK") runs against the stub and does what it says."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from oai_helpers import POLICIES, run

from governed_memory import verify_audit_log
from governed_memory._audit import AuditKey, audit_log_dir, generate_audit_key
from governed_memory._crypto import generate_master_key

if TYPE_CHECKING:
    from llm_stub import StubLLM

DOC = Path(__file__).resolve().parents[3] / "docs" / "integrations.md"


# Every marked example of the page, by name.
EXAMPLES = dict(
    re.findall(
        r"<!-- example: ([\w-]+) -->\n```python\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S
    )
)


def test_the_worked_example_resumes_encrypts_and_audits(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    stub_llm: StubLLM,
    capsys: pytest.CaptureFixture[str],
) -> None:
    workspace, audit_key = tmp_path / "ws", generate_audit_key()
    monkeypatch.setenv("WORKSPACE_DIR", str(workspace))
    monkeypatch.setenv("GOVERNED_MEMORY_POLICY", str(POLICIES / "regulated.toml"))
    monkeypatch.setenv("GOVERNED_MEMORY_MASTER_KEY", generate_master_key())
    monkeypatch.setenv("GOVERNED_MEMORY_KEYRING_DIR", str(tmp_path / "keyring"))
    monkeypatch.setenv("GOVERNED_MEMORY_AUDIT_KEY", audit_key)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    monkeypatch.setenv("OPENAI_BASE_URL", stub_llm.url)
    stub_llm.queue("Done: the card ending in 4411 is blocked.", "The card ending in 4411.")

    # The example's asyncio.run, on a loop of its own (oai_helpers.run says why).
    monkeypatch.setattr(asyncio, "run", run)
    namespace: dict[str, Any] = {"__name__": "worked_example"}
    exec(compile(EXAMPLES["openai-agents"], str(DOC), "exec"), namespace)

    assert capsys.readouterr().out == "The card ending in 4411.\n4 items\n"
    # the second run was sent the first one, read back from governed memory
    second = [(m["role"], m["content"]) for m in stub_llm.requests[1]["messages"]]
    assert second[1:3] == [
        ("user", "My card ends in 4411; block it."),
        ("assistant", "Done: the card ending in 4411 is blocked."),
    ]
    files = [p for p in tmp_path.rglob("*") if p.is_file()]
    memories = [p for p in files if p.name == "MEMORY.md.gmenc"]
    assert [p.relative_to(workspace).parts[:3] for p in memories] == [
        ("agents", "conversation-123", "subjects")
    ]
    # The messages' words, not the bare "4411": four digits turn up by chance in the
    # keyring's random key text (about one run in 500 did).
    assert not [p for p in files if b"in 4411" in p.read_bytes()]
    namespace["governance"].audit.close()
    folder = audit_log_dir(namespace["governance"].policy, workspace)
    assert verify_audit_log(folder, AuditKey.from_text(audit_key), workspace=workspace).ok
