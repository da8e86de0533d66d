"""A configured policy governs every Conversation, Agent and ContextCompressor of the process.

Issue 12, defect 1: with only the admin's environment set, code written for
the reference (no ``governance=``) must run under the policy; ``governance=None``
cannot opt out of a non-default one; a default-mode Conversation never writes
plaintext beside encrypted memory. With no policy configured, nothing changes.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from click.testing import CliRunner

import governed_memory
from governed_memory import (
    Agent,
    ConfigurationError,
    ContextCompressor,
    Conversation,
    Governance,
    Settings,
    generate_audit_key,
    generate_master_key,
    memory_md_path,
)
from governed_memory._cli import main
from governed_memory._protocols import default_governance
from governed_memory._stores import ENCRYPTED_MEMORY
from governed_memory._wiring import shared_governance

SECRET = "alice's IBAN DE89370400440532013000"


@pytest.fixture
def regulated(monkeypatch: pytest.MonkeyPatch, workspace: Path) -> Path:
    """The environment an admin sets for the shipped regulated policy; returns the workspace."""
    monkeypatch.setenv("WORKSPACE_DIR", str(workspace))
    monkeypatch.setenv("GOVERNED_MEMORY_POLICY", "regulated")
    monkeypatch.setenv("GOVERNED_MEMORY_MASTER_KEY", generate_master_key())
    monkeypatch.setenv("GOVERNED_MEMORY_AUDIT_KEY", generate_audit_key())
    return workspace


def _bytes_under(folder: Path) -> bytes:
    return b"".join(p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file())


def _audit_entries(workspace: Path) -> list[dict[str, object]]:
    lines: list[dict[str, object]] = []
    for segment in sorted((workspace / ".governed_memory" / "audit").glob("audit-*.jsonl")):
        lines += [json.loads(line) for line in segment.read_text().splitlines() if line]
    return lines


# -- the configured policy applies without governance= ---------------------------


def test_reference_code_under_regulated_env_writes_nothing_unconsented(regulated: Path) -> None:
    conversation = Conversation(
        name="teller", subject_id="alice", memory_md_path=memory_md_path("Teller", regulated)
    )
    conversation.add("Human", SECRET)
    assert conversation.governance is not None
    assert conversation.conversation_history[-1]["content"] == SECRET  # kept in memory only
    folder = regulated / "agents" / "Teller"
    assert not (folder / "MEMORY.md").exists(), "no plaintext memory under an encrypting policy"
    assert SECRET.encode() not in _bytes_under(regulated)
    operations = [
        entry.get("operation") or entry.get("event") for entry in _audit_entries(regulated)
    ]
    assert operations, "the decision is audited"
    assert any("persist" in str(op) for op in operations), operations


def test_reference_code_under_regulated_env_encrypts_consented_words(regulated: Path) -> None:
    conversation = Conversation(
        name="teller", subject_id="alice", memory_md_path=memory_md_path("Teller", regulated)
    )
    gate = conversation.governance
    assert isinstance(gate, Governance)
    gate.grant("alice", "persist", actor="test")
    conversation.add("Human", SECRET)
    folder = regulated / "agents" / "Teller"
    assert (folder / ENCRYPTED_MEMORY).exists()
    assert not (folder / "MEMORY.md").exists()
    assert SECRET.encode() not in _bytes_under(regulated)
    # regulated isolates subjects: alice's words come back to alice's conversation only.
    again = Conversation(
        name="teller", subject_id="alice", memory_md_path=memory_md_path("Teller", regulated)
    )
    assert SECRET in again.conversation_history[-1]["content"]  # decrypted on preload
    someone_else = Conversation(name="teller", memory_md_path=memory_md_path("Teller", regulated))
    assert SECRET not in someone_else.get_str()


def test_a_policy_override_alone_configures_a_policy(
    monkeypatch: pytest.MonkeyPatch, workspace: Path
) -> None:
    monkeypatch.setenv("WORKSPACE_DIR", str(workspace))
    monkeypatch.setenv("GOVERNED_MEMORY_ENCRYPTION__ENABLED", "true")
    monkeypatch.setenv("GOVERNED_MEMORY_MASTER_KEY", generate_master_key())
    conversation = Conversation(memory_md_path=memory_md_path("A", workspace))
    conversation.add("Human", SECRET)
    assert conversation.governance is not None
    assert (workspace / "agents" / "A" / ENCRYPTED_MEMORY).exists()
    assert SECRET.encode() not in _bytes_under(workspace)


def test_agent_and_compressor_run_under_the_configured_policy(regulated: Path) -> None:
    agent = Agent("Teller", subject_id="alice", completion=lambda **_: None)
    assert agent.short_memory.governance is not None
    assert agent.memory_md_path == memory_md_path("Teller", regulated)
    assert agent._context_compressor is not None
    assert agent._context_compressor.governance is agent.short_memory.governance
    assert ContextCompressor().governance is agent.short_memory.governance


def test_a_misspelt_policy_variable_is_refused_not_ignored(
    monkeypatch: pytest.MonkeyPatch, workspace: Path
) -> None:
    monkeypatch.setenv("GOVERNED_MEMORY_POLCY", "regulated")
    with pytest.raises(ConfigurationError, match="GOVERNED_MEMORY_POLICY"):
        Conversation(memory_md_path=memory_md_path("A", workspace))


# -- no silent opt-out -------------------------------------------------------------


def test_explicit_none_under_a_configured_policy_is_refused(regulated: Path) -> None:
    path = memory_md_path("Teller", regulated)
    with pytest.raises(ConfigurationError) as caught:
        Conversation(name="teller", memory_md_path=path, governance=None)
    message = str(caught.value)
    assert "'regulated'" in message and "regulated.toml" in message
    assert "GOVERNED_MEMORY_POLICY=regulated" in message
    assert "leave governance= out" in message and "unset" in message
    assert not path.parent.exists(), "nothing was written"


@pytest.mark.parametrize(
    "build",
    [
        pytest.param(lambda: Agent("Teller", governance=None), id="agent"),
        pytest.param(lambda: ContextCompressor(governance=None), id="compressor"),
    ],
)
def test_agent_and_compressor_cannot_opt_out_either(regulated: Path, build: object) -> None:
    with pytest.raises(ConfigurationError, match="GOVERNED_MEMORY_POLICY=regulated"):
        build()  # type: ignore[operator]


def test_explicit_none_under_the_configured_default_policy_is_default_mode(
    monkeypatch: pytest.MonkeyPatch, workspace: Path
) -> None:
    monkeypatch.setenv("GOVERNED_MEMORY_POLICY", "default")
    conversation = Conversation(memory_md_path=memory_md_path("A", workspace), governance=None)
    assert conversation.governance is None


def test_default_mode_refuses_an_encrypted_agent(
    regulated: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    governed = Conversation(subject_id="alice", memory_md_path=memory_md_path("Teller", workspace))
    assert isinstance(governed.governance, Governance)
    governed.governance.grant("alice", "persist", actor="test")
    governed.add("Human", SECRET)
    governed.memory_md_path = None
    monkeypatch.delenv("GOVERNED_MEMORY_POLICY")  # no policy configured any more
    folder = workspace / "agents" / "Teller"
    with pytest.raises(ConfigurationError) as caught:
        Conversation(memory_md_path=folder / "MEMORY.md")
    assert str(folder) in str(caught.value) and "GOVERNED_MEMORY_POLICY" in str(caught.value)
    assert not (folder / "MEMORY.md").exists(), "no plaintext MEMORY.md beside the encrypted one"


# -- one shared gate ---------------------------------------------------------------


def test_conversations_of_one_process_share_one_gate(regulated: Path) -> None:
    first = Conversation(memory_md_path=memory_md_path("A", regulated))
    second = Conversation(memory_md_path=memory_md_path("B", regulated))
    assert first.governance is not None
    assert first.governance is second.governance is default_governance()
    assert shared_governance(Settings()) is first.governance


def test_the_gate_is_built_once_under_concurrent_construction(regulated: Path) -> None:
    barrier = threading.Barrier(8)
    gates: list[object] = []
    lock = threading.Lock()

    def build(index: int) -> None:
        barrier.wait()
        conversation = Conversation(memory_md_path=memory_md_path(f"T{index}", regulated))
        with lock:
            gates.append(conversation.governance)

    threads = [threading.Thread(target=build, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(gates) == 8 and gates[0] is not None
    assert all(gate is gates[0] for gate in gates)


def test_another_workspace_or_policy_is_another_gate(
    regulated: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    first = default_governance()
    monkeypatch.setenv("WORKSPACE_DIR", str(tmp_path / "other"))
    second = default_governance()
    monkeypatch.setenv("GOVERNED_MEMORY_POLICY", "hipaa")
    third = default_governance()
    assert first is not second and second is not third and first is not third


def test_cli_commands_use_the_shared_gate(regulated: Path) -> None:
    from governed_memory._cli._context import CliContext

    cli = CliContext(workspace_arg=None, policy_arg=None)
    assert cli.governance() is cli.governance() is default_governance()


# -- no policy configured: the reference, unchanged ---------------------------------


def test_no_policy_configured_is_default_mode(
    monkeypatch: pytest.MonkeyPatch, workspace: Path
) -> None:
    # Keys and endpoints are settings, not a policy.
    monkeypatch.setenv("GOVERNED_MEMORY_MASTER_KEY", generate_master_key())
    monkeypatch.setenv("GOVERNED_MEMORY_AUDIT_KEY", generate_audit_key())
    conversation = Conversation(memory_md_path=memory_md_path("A", workspace))
    conversation.add("Human", "hello")
    assert conversation.governance is None
    assert Conversation(governance=None).governance is None
    assert ContextCompressor().governance is None
    assert b"hello" in (workspace / "agents" / "A" / "MEMORY.md").read_bytes()


def test_no_policy_configured_loads_no_heavy_dependency(tmp_path: Path) -> None:
    code = f"""
        import json, os, sys
        os.environ["GOVERNED_MEMORY_MASTER_KEY"] = "not read in default mode"
        from governed_memory import Conversation, memory_md_path
        conversation = Conversation(memory_md_path=memory_md_path("Light", {str(tmp_path)!r}))
        conversation.add("User", "hello")
        print(json.dumps(sorted(m for m in ("pydantic", "cryptography") if m in sys.modules)))
        """
    env = {k: v for k, v in __import__("os").environ.items() if not k.startswith("GOVERNED_")}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    )
    assert json.loads(done.stdout) == []


def test_the_demo_shows_default_mode_under_a_configured_policy(regulated: Path) -> None:
    result = CliRunner().invoke(main, ["demo"])
    assert result.exit_code == 0, result.output
    assert "the configured policy is not applied" in result.output
    assert not (regulated / "agents").exists(), "the demo stays in its own workspace"


# -- the lists the cheap checks keep agree with the modules that own them -----------


def test_the_settings_that_are_not_a_policy_are_the_settings_fields() -> None:
    fields = set(Settings.model_fields) - {"policy", "workspace_dir"}
    fields -= {"consent", "encryption", "summarization", "retention", "schedule", "audit"}
    fields -= {"evidence", "durability"}
    fields -= {"database_url"}  # a database governs too: no ungoverned memory beside it
    assert {f"GOVERNED_MEMORY_{name.upper()}" for name in fields} == set(
        governed_memory._NOT_A_POLICY
    )


def test_the_encrypted_memory_name_is_the_encrypted_stores() -> None:
    from governed_memory._memory import _conversation

    assert _conversation._ENCRYPTED_MEMORY == ENCRYPTED_MEMORY
