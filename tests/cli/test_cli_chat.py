"""``governed-memory chat``: prompt, reply, /exit, EOF, memory kept between runs."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from llm_stub import StubLLM

from governed_memory import parse_memory
from governed_memory._cli import main

MODEL = "openai/house-model"


@pytest.fixture(autouse=True)
def _api_key(monkeypatch: pytest.MonkeyPatch) -> None:
    """Keys come from litellm's own variables, as for a person at a terminal."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")


def chat(workspace: Path, stub: StubLLM, text: str, *extra: str) -> tuple[int, str, str]:
    args = ["--workspace", str(workspace), "chat", "Ada", "--model", MODEL, "--api-base", stub.url]
    result = CliRunner().invoke(main, [*args, *extra], input=text)
    return result.exit_code, result.stdout, result.stderr


def test_prompt_reply_and_exit(workspace: Path, stub_llm: StubLLM) -> None:
    stub_llm.queue("Hello, Grace.")
    code, out, _ = chat(workspace, stub_llm, "Hi, I am Grace.\n/exit\nnever read\n")
    assert code == 0
    assert "you> " in out
    assert "Ada> Hello, Grace." in out
    assert len(stub_llm.requests) == 1
    records = parse_memory((workspace / "agents" / "Ada" / "MEMORY.md").read_text()).records
    assert [(r.role, r.content) for r in records] == [
        ("Human", "Hi, I am Grace."),
        ("Ada", "Hello, Grace."),
    ]


def test_end_of_input_ends_the_chat(workspace: Path, stub_llm: StubLLM) -> None:
    code, out, _ = chat(workspace, stub_llm, "first\n\n   \nsecond\n")
    assert code == 0
    assert out.count("Ada> stub reply") == 2
    assert len(stub_llm.requests) == 2  # blank lines are not sent


def test_memory_is_kept_between_runs(workspace: Path, stub_llm: StubLLM) -> None:
    chat(workspace, stub_llm, "My favourite colour is teal.\n/exit\n")
    stub_llm.queue("Teal.")
    code, out, _ = chat(workspace, stub_llm, "What is my favourite colour?\n")
    assert code == 0
    assert "(resumed from earlier sessions)" in out
    assert "Ada> Teal." in out
    assert "My favourite colour is teal." in stub_llm.requests[-1]["messages"][-1]["content"]


def test_a_failed_call_is_reported_and_the_chat_goes_on(workspace: Path, stub_llm: StubLLM) -> None:
    # A bad request is final: one failed request, not retried (tests/memory/test_agent_retry.py).
    stub_llm.queue({"status": 400}, "Back again.")
    code, out, err = chat(workspace, stub_llm, "one\ntwo\n/exit\n")
    assert code == 1
    assert "error: the call to model 'openai/house-model'" in err
    assert "Ada> Back again." in out


def test_local_summarizer_option_compresses_offline(workspace: Path, stub_llm: StubLLM) -> None:
    stub_llm.responder = lambda body: (
        "The Falcon budget is 1000 EUR and the deadline is Friday. " * 6
    )
    lines = "".join(f"question {i} about Falcon\n" for i in range(6))
    code, _, _ = chat(
        workspace, stub_llm, lines, "--context-length", "300", "--summarizer", "local/extractive"
    )
    assert code == 0
    assert list((workspace / "agents" / "Ada" / "archive").iterdir())
    assert any(
        "[Compressed Memory Summary]" in r["messages"][-1]["content"] for r in stub_llm.requests
    )


def test_bad_agent_name_exits_1(workspace: Path, stub_llm: StubLLM) -> None:
    result = CliRunner().invoke(
        main, ["--workspace", str(workspace), "chat", "../escape", "--model", MODEL], input=""
    )
    assert result.exit_code == 1
    assert "agent_name '../escape'" in result.stderr


def test_model_is_required(workspace: Path) -> None:
    result = CliRunner().invoke(main, ["--workspace", str(workspace), "chat", "Ada"], input="")
    assert result.exit_code == 2


def test_the_installed_command(workspace: Path, stub_llm: StubLLM) -> None:
    script = Path(sys.executable).parent / "governed-memory"
    env = {**os.environ, "OPENAI_API_KEY": "sk-test"}
    env.pop("OPENAI_API_BASE", None)
    done = subprocess.run(
        [
            str(script),
            "--workspace",
            str(workspace),
            "chat",
            "Ada",
            "-m",
            MODEL,
            "--api-base",
            stub_llm.url,
        ],
        input="hello there\n/exit\n",
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "Ada> stub reply" in done.stdout
    assert (workspace / "agents" / "Ada" / "MEMORY.md").is_file()
