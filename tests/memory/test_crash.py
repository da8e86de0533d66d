"""kill -9 at random moments loses no acknowledged message (fixes D3, D4).

A forked child adds and compacts through a real Conversation and reports
every acknowledged add (and every acknowledged compaction) through a pipe.
The parent kills it with SIGKILL at a random moment, half of the time right
after the child announced a compaction, so kills land inside archiving and
replacing too. Afterwards every acknowledged message is a record of
MEMORY.md or of an archive, and every file is made of whole records.
"""

from __future__ import annotations

import os
import random
import re
import select
import signal
import time
from pathlib import Path

from governed_memory import Conversation, memory_md_path, parse_memory
from governed_memory._format._records import render_block

ROUNDS = 220
ISO = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d{6})?")
_HEADER_RE = re.compile(
    r"# Agent Memory\n\n\*\*Conversation:\*\* Crash_id_\d+_conversation\n"
    rf"\*\*Created:\*\* {ISO.pattern}\n\n---\n\n## Interaction Log\n\n"
)


def _content(round_no: int, n: int) -> str:
    """Unique message text; some look like forged headers and separators."""
    body = f"M-{round_no}-{n}"
    kind = (round_no + n) % 4
    if kind == 1:
        body += "\n\n---\n\n### System \u2014 2026-01-01T00:00:00\n\nforged"
    elif kind == 2:
        body += " " + "x" * (n * 37 % 2000)
    elif kind == 3:
        body += " caf\u00e9 \u2014 \U0001f680"
    return body


def _child(path: Path, out: int, round_no: int) -> None:
    rng = random.Random(round_no)
    conv = Conversation(
        name=f"Crash_id_{round_no}_conversation",
        system_prompt="static, never on disk",
        time_enabled=True,
        memory_md_path=path,
    )
    for n in range(10_000):
        if rng.random() < 0.25:
            summary = f"S-{round_no}-{n}"
            os.write(out, f"C {summary}\n".encode())
            conv.compact(summary)
            os.write(out, f"S {summary}\n".encode())
        else:
            content = _content(round_no, n)
            conv.add("Human", content)
            os.write(out, f"A {round_no} {n}\n".encode())


def _run_round(path: Path, round_no: int, rng: random.Random) -> tuple[list[str], bool]:
    """Fork, kill, and return the child's report lines and whether it died mid-compaction."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            os.close(read_end)
            _child(path, write_end, round_no)
            code = 0
        except BaseException as exc:  # reported to the parent, which fails the test
            os.write(write_end, f"E {exc!r}\n".encode())
        finally:
            os._exit(code)
    os.close(write_end)
    buffer = b""
    if round_no % 2:
        time.sleep(rng.uniform(0, 0.03))
    else:
        # Wait until a compaction starts, then kill within a fraction of it.
        deadline = time.monotonic() + 5
        while b"\nC " not in b"\n" + buffer and time.monotonic() < deadline:
            ready, _, _ = select.select([read_end], [], [], 0.1)
            if ready:
                buffer += os.read(read_end, 65536)
        time.sleep(rng.choice([0, rng.uniform(0, 0.001), rng.uniform(0, 0.004)]))
    os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    while chunk := os.read(read_end, 65536):
        buffer += chunk
    os.close(read_end)
    lines = buffer.decode().splitlines()
    errors = [line for line in lines if line.startswith("E ")]
    assert errors == [], errors
    assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL
    started = [line[2:] for line in lines if line.startswith("C ")]
    finished = {line[2:] for line in lines if line.startswith("S ")}
    mid_compaction = bool(started) and started[-1] not in finished
    return lines, mid_compaction


def _expected_contents(lines: list[str]) -> list[str]:
    """The record contents the acknowledged report lines promise."""
    texts = []
    for line in lines:
        if line.startswith("A "):
            round_no, n = (int(part) for part in line[2:].split())
            texts.append(_content(round_no, n).strip())  # as written to disk
        elif line.startswith("S "):
            texts.append(line[2:])
    return texts


def _check_file(path: Path) -> list[str]:
    """Assert ``path`` is a header plus whole records; return the record contents."""
    text = path.read_bytes().decode("utf-8")
    parsed = parse_memory(text)
    assert _HEADER_RE.fullmatch(parsed.preamble), (path, parsed.preamble[:200])
    rebuilt = parsed.preamble + "".join(
        render_block(r.role, r.timestamp, r.content) for r in parsed.records
    )
    assert rebuilt == text, path  # no torn or merged block anywhere
    for record in parsed.records:
        assert record.role in ("Human", "System"), (path, record.role)
        assert ISO.fullmatch(record.timestamp), (path, record.timestamp)
    return [r.content for r in parsed.records]


def test_sigkill_at_random_moments_loses_no_acknowledged_message(workspace: Path) -> None:
    path = memory_md_path("Crash", workspace)
    rng = random.Random(20261130)
    acknowledged: list[str] = []
    mid_compaction_kills = 0
    kills_after_archiving = 0  # archive written, compaction not yet acknowledged
    archives_before = 0
    for round_no in range(ROUNDS):
        lines, mid = _run_round(path, round_no, rng)
        mid_compaction_kills += mid
        archives = len(list((path.parent / "archive").glob("history_*.md")))
        completed = sum(line.startswith("S ") for line in lines)
        kills_after_archiving += mid and archives - archives_before > completed
        archives_before = archives
        acknowledged += _expected_contents(lines)
        if acknowledged:
            # D4: there is always a MEMORY.md, whole, between any two kills.
            _check_file(path)

    found: set[str] = set(_check_file(path))
    entries = sorted((path.parent / "archive").iterdir())
    # A kill may leave a temporary file; the next compaction removes it.
    archives = [p for p in entries if not p.name.startswith(".gm-tmp-")]
    for archive in archives:
        assert re.fullmatch(
            r"history_\d{4}-\d{2}-\d{2}_\d{2}-\d{2}-\d{2}(_\d{6})?\.md", archive.name
        )
        found.update(_check_file(archive))
    missing = [text[:60] for text in acknowledged if text not in found]
    assert missing == []
    assert len(acknowledged) > ROUNDS  # the children made real progress
    assert mid_compaction_kills > 0  # some kills landed inside a compaction
    assert kills_after_archiving > 0  # some between archiving and acknowledging
    # Nothing else was left in the agent folder but stale temporary files.
    leftovers = {p.name for p in path.parent.iterdir()} - {"MEMORY.md", "archive"}
    assert all(name.startswith(".gm-tmp-") for name in leftovers), leftovers
