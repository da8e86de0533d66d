"""``governed-memory demo|agents|show`` through the real entry point."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from governed_memory import Conversation, FixedClock, memory_md_path, parse_memory
from governed_memory._cli import _memory, main

ANSI = re.compile(r"\x1b\[")
SCRIPT = Path(sys.executable).with_name("governed-memory")


def run(*args: str, columns: int = 250) -> tuple[int, str, str]:
    # Wide enough that long temporary paths are not wrapped across lines.
    result = CliRunner().invoke(
        main, list(args), prog_name="governed-memory", env={"COLUMNS": str(columns)}
    )
    return result.exit_code, result.stdout, result.stderr


def _agent(workspace: Path, name: str, clock: FixedClock, *messages: str) -> Conversation:
    conv = Conversation(
        name=f"{name}_conv",
        time_enabled=True,
        memory_md_path=memory_md_path(name, workspace),
        clock=clock,
    )
    for i, text in enumerate(messages):
        conv.add("Human" if i % 2 == 0 else name, text)
    return conv


# -- demo -------------------------------------------------------------------


def test_demo_in_an_explicit_workspace_keeps_the_files(workspace: Path) -> None:
    code, out, err = run("--workspace", str(workspace), "demo")
    assert code == 0, err
    for heading in ("1. Session 1", "2. Compaction", "3. Session 2", "4. On disk"):
        assert heading in out
    assert "[Persistent Memory — MEMORY.md]" in out  # the preload message is printed
    folder = workspace / "agents" / _memory.DEMO_AGENT
    memory = (folder / "MEMORY.md").read_text(encoding="utf-8")
    [summary] = parse_memory(memory).records
    assert summary.role == "System"
    assert summary.content.startswith("[Compressed Memory Summary]\n")
    assert "Original task (Human): Hi, I'm Dana Reyes." in summary.content
    assert "990 EUR in March" in summary.content
    assert re.search(r"tokens    (\d+) -> (\d+) ", out)
    [archive] = (folder / "archive").iterdir()
    archived = parse_memory(archive.read_text(encoding="utf-8")).records
    assert [(r.role, r.content) for r in archived] == list(_memory.DEMO_TURNS)
    assert _memory.DEMO_SYSTEM_PROMPT not in memory + archive.read_text(encoding="utf-8")
    # The tree shows modes and the files' contents are printed.
    assert "MEMORY.md" in out and "0600" in out and "0700" in out
    assert "SO-4471" in out and archive.name in out
    for path in (folder / "MEMORY.md", archive):
        assert (path.stat().st_mode & 0o777) == 0o600
    assert f"Files kept in {workspace}" in out


def test_demo_without_workspace_uses_a_temporary_one_and_removes_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env_ws = tmp_path / "env-ws"
    monkeypatch.setenv("WORKSPACE_DIR", str(env_ws))
    code, out, _ = run("demo")
    assert code == 0
    match = re.search(r"Workspace\s+(\S+governed-memory-demo-\S+)", out)
    assert match is not None, out
    assert not Path(match.group(1)).exists()
    assert "temporary workspace was removed" in out
    # Neither $WORKSPACE_DIR nor ./agent_workspace (cwd is tmp_path) was touched.
    assert not env_ws.exists()
    assert not (tmp_path / "agent_workspace").exists()


def test_demo_output_is_plain_and_fits_80_columns_when_not_a_terminal(workspace: Path) -> None:
    code, out, _ = run("--workspace", str(workspace), "demo", columns=80)
    assert code == 0
    assert not ANSI.search(out)
    assert max(len(line) for line in out.splitlines()) <= 80


def test_demo_compacts_with_demo_summary(workspace: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The compaction text comes from _demo_summary, the compression layer's seam."""
    seen: list[int] = []

    def summary(conversation: Conversation) -> str:
        seen.append(len(conversation.conversation_history))
        return "a swapped-in summary"

    monkeypatch.setattr(_memory, "_demo_summary", summary)
    code, _, _ = run("--workspace", str(workspace), "demo")
    assert code == 0
    # System prompt + every demo turn were in the history handed over.
    assert seen == [1 + len(_memory.DEMO_TURNS)]
    memory = memory_md_path(_memory.DEMO_AGENT, workspace).read_text(encoding="utf-8")
    assert [r.content for r in parse_memory(memory).records] == ["a swapped-in summary"]


def test_demo_says_it_does_not_apply_a_policy(workspace: Path) -> None:
    code, out, _ = run("--policy", "regulated", "--workspace", str(workspace), "demo")
    assert code == 0 and "--policy is not applied" in out
    assert "--policy" not in run("--workspace", str(workspace), "demo")[1]


def test_demo_runs_twice_in_one_workspace(workspace: Path) -> None:
    assert run("--workspace", str(workspace), "demo")[0] == 0
    assert run("--workspace", str(workspace), "demo")[0] == 0
    archive = workspace / "agents" / _memory.DEMO_AGENT / "archive"
    assert len(list(archive.iterdir())) == 2


def test_demo_in_an_unusable_workspace_exits_1(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    code, _, err = run("--workspace", str(blocker / "ws"), "demo")
    assert code == 1
    assert err.startswith("error: ") and str(blocker) in err


# -- agents ------------------------------------------------------------------


def test_agents_in_an_empty_workspace_prints_a_friendly_line(tmp_path: Path) -> None:
    workspace = tmp_path / "nothing-here"
    code, out, _ = run("--workspace", str(workspace), "agents")
    assert code == 0
    assert out.startswith(f"No agents in workspace {workspace} yet.")
    assert not workspace.exists()
    code, out, _ = run("--workspace", str(workspace), "agents", "--json")
    assert code == 0 and json.loads(out) == []


def test_agents_lists_each_agent(workspace: Path, clock: FixedClock) -> None:
    quant = _agent(workspace, "QuantAgent", clock, "q1", "a1", "q2")
    quant.compact("summary")
    _agent(workspace, "Support", clock, "hello")
    code, out, _ = run("--workspace", str(workspace), "agents")
    assert code == 0
    rows = {line.split("│")[1].strip(): line for line in out.splitlines() if "│" in line}
    assert set(rows) >= {"QuantAgent", "Support"}
    assert re.search(r"│ QuantAgent\s+│ 1\s+│ 1\s+│ \d", rows["QuantAgent"])
    assert re.search(r"│ Support\s+│ 1\s+│ 0\s+│ \d", rows["Support"])


def test_agents_json(workspace: Path, clock: FixedClock) -> None:
    _agent(workspace, "QuantAgent", clock, "q1", "a1").compact("summary")
    code, out, _ = run("--workspace", str(workspace), "agents", "--json")
    assert code == 0
    [agent] = json.loads(out)
    assert agent["name"] == "QuantAgent"
    assert (agent["messages"], agent["archives"]) == (1, 1)
    folder = workspace / "agents" / "QuantAgent"
    sizes = [p.stat().st_size for p in folder.rglob("*.md")]
    assert agent["size_bytes"] == sum(sizes)
    assert agent["last_activity"].startswith("2026-11-30T10:00")


def test_agents_reads_the_workspace_from_the_environment(
    workspace: Path, clock: FixedClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    _agent(workspace, "EnvAgent", clock, "hi")
    monkeypatch.setenv("WORKSPACE_DIR", str(workspace))
    code, out, _ = run("agents", "--json")
    assert code == 0 and [a["name"] for a in json.loads(out)] == ["EnvAgent"]


# -- show --------------------------------------------------------------------


def test_show_prints_the_records(workspace: Path, clock: FixedClock) -> None:
    _agent(workspace, "A", clock, "what is my balance?", "It is 120 EUR.")
    code, out, _ = run("--workspace", str(workspace), "show", "A")
    assert code == 0
    assert "what is my balance?" in out and "It is 120 EUR." in out
    assert "Human" in out and "2026-11-30T10:00:00" in out
    assert "archive" not in out  # no archives, so no hint about them


def test_show_hints_at_archives_and_lists_them_with_their_source(
    workspace: Path, clock: FixedClock
) -> None:
    conv = _agent(workspace, "A", clock, "old question")
    conv.compact("summary of the old question")
    code, out, _ = run("--workspace", str(workspace), "show", "A")
    assert code == 0
    assert "old question" not in out.replace("summary of the old question", "")
    assert "1 archive is not shown; add --archives" in out
    code, out, _ = run("--workspace", str(workspace), "show", "A", "--archives")
    assert code == 0
    [archive] = (workspace / "agents" / "A" / "archive").iterdir()
    assert "#1  Human" in out and "    old question" in out
    # Records are grouped under the file they come from.
    assert out.index(archive.name) < out.index("old question") < out.index("MEMORY.md")


def test_show_json(workspace: Path, clock: FixedClock) -> None:
    conv = _agent(workspace, "A", clock, "first")
    conv.compact("sum")
    conv.add("A", "second")
    code, out, _ = run("--workspace", str(workspace), "show", "A", "--json", "--archives")
    assert code == 0
    data = json.loads(out)
    assert data["agent"] == "A" and data["folder"] == str(workspace / "agents" / "A")
    assert [(r["role"], r["content"], r["archived"]) for r in data["records"]] == [
        ("Human", "first", True),
        ("System", "sum", False),
        ("A", "second", False),
    ]
    assert data["records"][0]["source"].startswith("archive/history_")
    code, out, _ = run("--workspace", str(workspace), "show", "A", "--json")
    assert [r["content"] for r in json.loads(out)["records"]] == ["sum", "second"]


def test_show_prints_content_literally_not_as_markup(workspace: Path, clock: FixedClock) -> None:
    _agent(workspace, "A", clock, "[bold]not bold[/bold] and [/x] stray")
    code, out, err = run("--workspace", str(workspace), "show", "A")
    assert code == 0, err
    assert "[bold]not bold[/bold] and [/x] stray" in out


def test_show_agent_without_records(workspace: Path, clock: FixedClock) -> None:
    _agent(workspace, "Quiet", clock)
    code, out, _ = run("--workspace", str(workspace), "show", "Quiet")
    assert code == 0 and "has no records" in out


def test_show_unknown_agent_exits_1_with_the_fix(workspace: Path) -> None:
    code, out, err = run("--workspace", str(workspace), "show", "Ghost")
    assert code == 1 and out == ""
    assert err.startswith("error: agent 'Ghost' has no memory")
    assert "governed-memory agents" in err and err.count("\n") == 1


def test_show_invalid_agent_name_exits_1(workspace: Path) -> None:
    code, _, err = run("--workspace", str(workspace), "show", "../etc")
    assert code == 1
    assert "agent_name '../etc' contains a path separator" in err


@pytest.mark.parametrize(
    "args",
    [["show"], ["show", "A", "--bogus"], ["agents", "--bogus"], ["demo", "extra"]],
    ids=["show-missing-agent", "show-bad-option", "agents-bad-option", "demo-extra-arg"],
)
def test_usage_errors_exit_2(args: list[str]) -> None:
    code, _, err = run(*args)
    assert code == 2 and "Usage:" in err


# -- the installed console script ---------------------------------------------


def test_console_script_runs_demo_agents_and_show(workspace: Path) -> None:
    assert SCRIPT.exists(), f"console script not installed at {SCRIPT}"
    env = {k: v for k, v in os.environ.items() if k != "WORKSPACE_DIR"}
    env["COLUMNS"] = "100"

    def script(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(SCRIPT), "--workspace", str(workspace), *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
            check=False,
        )

    demo = script("demo")
    assert demo.returncode == 0, demo.stderr
    assert "4. On disk" in demo.stdout and not ANSI.search(demo.stdout)
    listed = script("agents", "--json")
    assert listed.returncode == 0
    assert [a["name"] for a in json.loads(listed.stdout)] == [_memory.DEMO_AGENT]
    missing = script("show", "Ghost")
    assert missing.returncode == 1 and missing.stderr.startswith("error: agent 'Ghost'")
    usage = script("show")
    assert usage.returncode == 2


# -- encrypted memory ------------------------------------------------------------


def test_agents_and_show_read_encrypted_memory_through_the_policy_store(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from governed_memory import Governance, Settings
    from governed_memory._crypto import generate_master_key

    policy = tmp_path / "encrypted.toml"
    policy.write_text('[policy]\nid = "enc"\nversion = "1"\n\n[encryption]\nenabled = true\n')
    workspace = tmp_path / "ws"
    monkeypatch.setenv("GOVERNED_MEMORY_MASTER_KEY", generate_master_key())
    gov = Governance(settings=Settings(policy=policy, workspace_dir=workspace))
    conv = Conversation(
        name="c",
        time_enabled=True,
        memory_md_path=memory_md_path("Vault", workspace),
        governance=gov,
    )
    conv.add("Human", "balance 4200 EUR")
    conv.compact("asked for the balance")
    folder = workspace / "agents" / "Vault"
    assert not (folder / "MEMORY.md").exists()  # only ciphertext on disk

    code, out, err = run("--policy", str(policy), "--workspace", str(workspace), "agents", "--json")
    assert code == 0, err
    [agent] = json.loads(out)
    assert (agent["name"], agent["messages"], agent["archives"]) == ("Vault", 1, 1)
    code, out, err = run(
        "--policy",
        str(policy),
        "--workspace",
        str(workspace),
        "show",
        "Vault",
        "--archives",
        "--json",
    )
    assert code == 0, err
    records = json.loads(out)["records"]
    assert [(r["content"], r["archived"]) for r in records] == [
        ("balance 4200 EUR", True),
        ("asked for the balance", False),
    ]
    # Without the key the command fails cleanly, naming the fix.
    monkeypatch.delenv("GOVERNED_MEMORY_MASTER_KEY")
    code, _, err = run("--policy", str(policy), "--workspace", str(workspace), "show", "Vault")
    assert code == 1 and "master key" in err
