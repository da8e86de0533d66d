"""Processes share a session safely, and kill -9 mid-operation leaves the old state or the new one.

Each child imports the Agents SDK (about 2 s), so each test runs under one
policy: the plaintext store for concurrent writers, the encrypted one
(framed appends, rewrites under a data key) for the crash.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from oai_helpers import POLICIES, SUBJECT, Setup, close_audit, make_setup, run

from governed_memory.integrations.openai_agents import GovernedSession

# The child runs under the configured policy (the environment), as a deployed process would.
CHILD = """
import asyncio, sys
from governed_memory.integrations.openai_agents import GovernedSession

tag, mode, count = sys.argv[1], sys.argv[2], int(sys.argv[3])
session = GovernedSession("conv-1", subject_id=sys.argv[4])

async def main():
    for i in range(count):
        if mode == "append":
            await session.add_items([{"role": "user", "content": f"{tag}-{i}"}])
            continue
        await session.add_items([{"role": "user", "content": f"{tag}-a{i}"},
                                 {"role": "assistant", "content": f"{tag}-b{i}"}])
        await session.pop_item()
        if i == 2:
            print("ready", flush=True)

asyncio.run(main())
"""


def _env(setup: Setup) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GOVERNED_MEMORY_")}
    env["WORKSPACE_DIR"] = str(setup.workspace)
    env["GOVERNED_MEMORY_POLICY"] = str(POLICIES / f"{setup.name}.toml")
    master = setup.settings.master_key
    assert master is not None
    env["GOVERNED_MEMORY_MASTER_KEY"] = master.get_secret_value()
    env["GOVERNED_MEMORY_KEYRING_DIR"] = str(setup.settings.keyring_dir)
    env["GOVERNED_MEMORY_AUDIT_KEY"] = setup.audit_key
    return env


def _child(setup: Setup, tag: str, mode: str, count: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, tag, mode, str(count), SUBJECT],
        env=_env(setup),
        stdout=subprocess.PIPE,
        text=True,
    )


def _contents(setup: Setup) -> list[str]:
    session = GovernedSession("conv-1", subject_id=SUBJECT, governance=setup.new_governance())
    return [str(item["content"]) for item in run(session.get_items())]


@pytest.fixture
def default(tmp_path: Path) -> Setup:
    return make_setup(tmp_path, "default")


def test_two_processes_append_to_one_session_without_losing_an_item(default: Setup) -> None:
    setup = default
    children = [_child(setup, tag, "append", 25) for tag in ("p", "q")]
    for child in children:
        assert child.wait(timeout=60) == 0
        assert child.stdout is not None
        child.stdout.close()
    contents = _contents(setup)
    assert len(contents) == 50
    for tag in ("p", "q"):
        assert [c for c in contents if c.startswith(f"{tag}-")] == [f"{tag}-{i}" for i in range(25)]


def test_kill_9_mid_operation_leaves_the_old_state_or_the_new_one(regulated: Setup) -> None:
    """The child adds two items and pops one, over and over; killed anywhere, the memory is whole."""
    setup = regulated
    close_audit(setup.gov)  # the child writes the audit log
    child = _child(setup, "k", "cycle", 100_000)
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    time.sleep(0.15)
    os.kill(child.pid, signal.SIGKILL)
    child.wait(timeout=30)
    child.stdout.close()
    contents = _contents(setup)
    n = len([c for c in contents if "-a" in c])
    assert n >= 3
    whole = [f"k-a{i}" for i in range(n)]
    # after a whole cycle: a0..a(n-1); between add_items and pop_item: also b(n-1)
    assert contents in (whole, [*whole, f"k-b{n - 1}"]), contents[-3:]
    # and the session goes on: no lock or temporary file is left in the way
    session = GovernedSession("conv-1", subject_id=SUBJECT, governance=setup.new_governance())
    run(session.add_items([{"role": "user", "content": "after"}]))
    assert run(session.pop_item()) == {"role": "user", "content": "after"}
    assert _contents(setup) in (whole, [*whole, f"k-b{n - 1}"])
    # a copy of old text a killed rewrite left behind is gone after the next rewrite
    assert [p.name for p in Path(setup.workspace).rglob(".gm-tmp-*")] == []
