"""The master key rotation of docs/encryption.md works exactly as written, audit chain included.

The test reads the documented shell lines and runs them one by one through
the real CLI entry point (``export``/``unset`` change the environment, a
``NAME=value`` prefix applies to one command), with an agent writing through
a Governance after every step, as the running processes would. Both ways of
providing the audit key are covered: an explicit ``GOVERNED_MEMORY_AUDIT_KEY``,
and one derived from the master key (which changes with it).
"""

from __future__ import annotations

import os
import re
import shlex
from pathlib import Path

import pytest
from click.testing import CliRunner

from governed_memory import Conversation, Governance, Settings, memory_md_path
from governed_memory._crypto import generate_master_key

DOC = Path(__file__).resolve().parents[2] / "docs" / "encryption.md"
AUDIT_KEY = "0f" * 32


def _documented_lines() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    found = re.search(r"<!-- example: rotation -->\n```sh\n(.*?)```", text, re.S)
    assert found, "docs/encryption.md has no rotation example"
    return [
        line
        for line in found.group(1).splitlines()
        if line.strip() and not line.lstrip().startswith("#")
    ]


def _policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(
        '[policy]\nid = "bank"\nversion = "1"\n\n[audit]\nenabled = true\n\n'
        "[encryption]\nenabled = true\n"
    )
    return path


class Admin:
    """Runs documented lines: ``export``, ``unset`` and ``governed-memory ...``."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.results: list[tuple[str, int, str]] = []

    def run(self, line: str) -> tuple[int, str]:
        from governed_memory._cli import main

        words = shlex.split(line)
        if words[0] == "export":
            name, _, value = words[1].partition("=")
            self.env[name] = value
            return 0, ""
        if words[0] == "unset":
            self.env.pop(words[1], None)
            return 0, ""
        once = dict(self.env)
        while "=" in words[0]:
            name, _, value = words.pop(0).partition("=")
            once[name] = value
        assert words[0] == "governed-memory", line
        full = {k: once.get(k) for k in {*once, *_SETTINGS}}
        result = CliRunner().invoke(main, words[1:], env=full, prog_name="governed-memory")
        output = result.stdout + result.stderr
        self.results.append((line, result.exit_code, output))
        return result.exit_code, output

    def settings(self) -> Settings:
        """The settings a restarted process gets from this environment."""
        saved = dict(os.environ)
        try:
            os.environ.update(self.env)
            for name in _SETTINGS - set(self.env):
                os.environ.pop(name, None)
            return Settings()
        finally:
            os.environ.clear()
            os.environ.update(saved)


_SETTINGS = {
    "GOVERNED_MEMORY_MASTER_KEY",
    "GOVERNED_MEMORY_MASTER_KEY_FILE",
    "GOVERNED_MEMORY_MASTER_KEY_OLD",
    "GOVERNED_MEMORY_MASTER_KEY_OLD_FILE",
    "GOVERNED_MEMORY_AUDIT_KEY",
}


def _agent_writes(admin: Admin, workspace: Path, text: str) -> None:
    """What a (restarted) agent process does between the steps: one governed add."""
    gov = Governance(workspace=workspace, settings=admin.settings())
    try:
        conv = Conversation(
            memory_md_path=memory_md_path("Teller", workspace), governance=gov, subject_id="c-1"
        )
        conv.add("Human", text)
    finally:
        gov.audit.close()  # type: ignore[attr-defined]


@pytest.mark.parametrize("derived", [True, False], ids=["derived-audit-key", "explicit-audit-key"])
def test_the_documented_rotation_keeps_memory_readable_and_the_audit_chain_verifiable(
    tmp_path: Path, workspace: Path, derived: bool
) -> None:
    old = tmp_path / "old.key"
    old.write_text(generate_master_key() + "\n")
    old.chmod(0o600)
    env = {
        "WORKSPACE_DIR": str(workspace),
        "GOVERNED_MEMORY_POLICY": str(_policy(tmp_path)),
        "GOVERNED_MEMORY_MASTER_KEY_FILE": "old.key",
    }
    if not derived:
        env["GOVERNED_MEMORY_AUDIT_KEY"] = AUDIT_KEY
    admin = Admin(env)
    Governance(workspace=workspace, settings=admin.settings()).grant("c-1", "persist", actor="dpo")
    _agent_writes(admin, workspace, "before the rotation")

    lines = _documented_lines()
    assert lines[0].startswith("governed-memory keys generate")
    writes = 1
    for index, line in enumerate(lines):
        code, output = admin.run(line)
        assert code == 0, f"{line}: {output}"
        if index + 1 < len(lines) and lines[index + 1].startswith("export"):
            continue  # both keys first, then the restart
        # The processes restarted with this configuration keep writing (step 2 used to
        # end here with AuditWriteError under a derived audit key).
        _agent_writes(admin, workspace, f"after: {line}")
        writes += 1
        if line.startswith("unset"):
            code, output = admin.run("governed-memory audit verify")
            if derived:  # the entries before the rotation need the old key, and verify says so
                assert code == 1 and "wrong_key" in output and "audit.rekey" in output, output
            else:
                assert code == 0, output

    # Every message, before and after, reads back under the new key alone.
    from governed_memory import agent_records

    gov = Governance(workspace=workspace, settings=admin.settings())
    contents = [
        r.content for r in agent_records(workspace, "Teller", store_factory=gov.store_factory)
    ]
    assert "before the rotation" in contents and len(contents) == writes, contents
    generated = next(o for line, _, o in admin.results if "keys generate" in line)
    new_id = re.search(r"local:[0-9a-f]{16}", generated)
    assert new_id is not None
    status = next(o for line, _, o in admin.results if line == "governed-memory keys status")
    assert new_id.group(0) in status
    rekeys = [
        line for line, _, o in admin.results if line.endswith("audit verify") and "FAILED" in o
    ]
    assert len(rekeys) == (1 if derived else 0)  # only the deliberate check without the old key
