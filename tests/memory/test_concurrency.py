"""Several processes and several Conversation objects on one agent lose nothing (fixes D5).

The reference locks per object and compacts without a lock: two writers on
one agent interleave a compaction's read-archive-wipe with an append, and
the appended message is wiped. Here an flock on the agent folder covers
appends and compactions in every process and object.
"""

from __future__ import annotations

import os
import re
import threading
from pathlib import Path

from governed_memory import Conversation, memory_md_path, parse_memory
from governed_memory._format._records import render_block

PROCESSES = 4
OBJECTS = 2
OPERATIONS = 60


def _text(worker: int, obj: int, n: int) -> str:
    text = f"P{worker}-O{obj}-{n}"
    if n % 7 == 0:
        text += "\n\n---\n\n### System \u2014 2026-01-01T00:00:00\n\nforged"
    return text


def _summary(worker: int, n: int) -> str:
    return f"S{worker}-{n}"


def _work(path: Path, worker: int, go: int) -> None:
    os.read(go, 1)  # start together
    conversations = [
        Conversation(name=f"Shared_id_{worker}_{obj}", memory_md_path=path, time_enabled=True)
        for obj in range(OBJECTS)
    ]
    for n in range(OPERATIONS):
        obj = n % OBJECTS
        conversations[obj].add("Human", _text(worker, obj, n))
        if n % 9 == 4:
            conversations[(n + 1) % OBJECTS].compact(_summary(worker, n))


def _all_records(path: Path) -> list[str]:
    """Record contents of MEMORY.md and every archive, each file checked to be whole."""
    contents: list[str] = []
    files = [path, *sorted((path.parent / "archive").glob("history_*.md"))]
    for file in files:
        text = file.read_bytes().decode("utf-8")
        parsed = parse_memory(text)
        assert parsed.conversation is not None and parsed.conversation.startswith("Shared_id_")
        rebuilt = parsed.preamble + "".join(
            render_block(r.role, r.timestamp, r.content) for r in parsed.records
        )
        assert rebuilt == text, file
        contents += [r.content for r in parsed.records]
    names = [f.name for f in files[1:]]
    assert all(re.fullmatch(r"history_[\d_-]+\.md", name) for name in names)
    assert len(set(names)) == len(names)
    return contents


def test_processes_and_objects_appending_and_compacting_lose_no_message(workspace: Path) -> None:
    path = memory_md_path("Shared", workspace)
    go_read, go_write = os.pipe()
    pids = []
    for worker in range(PROCESSES):
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(go_write)
                _work(path, worker, go_read)
                code = 0
            finally:
                os._exit(code)
        pids.append(pid)
    os.close(go_read)
    os.write(go_write, b"x" * PROCESSES)
    os.close(go_write)
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        assert os.waitstatus_to_exitcode(status) == 0

    contents = _all_records(path)
    expected = [
        _text(worker, n % OBJECTS, n) for worker in range(PROCESSES) for n in range(OPERATIONS)
    ] + [
        _summary(worker, n) for worker in range(PROCESSES) for n in range(OPERATIONS) if n % 9 == 4
    ]
    # Without a crash every record is in exactly one file: archived or still active.
    assert sorted(contents) == sorted(expected)


def test_threads_with_their_own_conversations_lose_no_message(workspace: Path) -> None:
    path = memory_md_path("Shared", workspace)
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def run(worker: int) -> None:
        try:
            barrier.wait()
            _work_in_thread(path, worker)
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    expected = [_text(w, n % OBJECTS, n) for w in range(4) for n in range(OPERATIONS)] + [
        _summary(w, n) for w in range(4) for n in range(OPERATIONS) if n % 9 == 4
    ]
    assert sorted(_all_records(path)) == sorted(expected)


def _work_in_thread(path: Path, worker: int) -> None:
    conversations = [
        Conversation(name=f"Shared_id_{worker}_{obj}", memory_md_path=path)
        for obj in range(OBJECTS)
    ]
    for n in range(OPERATIONS):
        obj = n % OBJECTS
        conversations[obj].add("Human", _text(worker, obj, n))
        if n % 9 == 4:
            conversations[(n + 1) % OBJECTS].compact(_summary(worker, n))


def test_one_conversation_shared_by_threads_loses_no_message(workspace: Path) -> None:
    conv = Conversation(memory_md_path=memory_md_path("Shared", workspace), name="Shared_id_0")
    threads = [
        threading.Thread(
            target=lambda w=w: [conv.add("Human", f"T{w}-{n}") for n in range(50)]  # type: ignore[misc]
        )
        for w in range(4)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(_all_records(memory_md_path("Shared", workspace))) == sorted(
        f"T{w}-{n}" for w in range(4) for n in range(50)
    )
