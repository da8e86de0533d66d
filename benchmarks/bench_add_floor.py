"""Where the time of one default-mode add() goes: system calls against Python.

Usage (from the repository root, in the project's virtual environment):

    python benchmarks/bench_add_floor.py [--adds 2000] [--rounds 40]

Times, per 400-byte message block appended to a MEMORY.md on the scratch
disk, the bare system-call sequences a locked append can be built from, then
the store's append and the whole ``Conversation.add()``. Every row runs in
this one process, rounds interleaved (a shared machine slows them all
alike); the table shows the fastest round and the median.

Rows:

* ``flock + write + unlock``: the floor of any append that holds the agent
  folder's inter-process lock.
* ``+ FIONREAD + lseek (ours)``: the checks the store makes under the lock:
  is an inotify event pending (MEMORY.md or a folder replaced, removed,
  moved) and has the file's size changed (another writer appended).
* ``+ stat folder + stat file (before)``: the earlier checks, two path
  lookups building two ``stat_result`` objects.
* ``+ fstat (nlink, size)``: the alternative that reads the link count; it
  cannot see a moved file or folder, nor a replacement behind a hard link.
* ``PlaintextAgentStore.append_utf8``: the store's real hot path.
* ``Conversation.add`` and the same with the store's write stubbed out: the
  rest is building the message, the timestamp and the block.
"""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import statistics
import sys
import tempfile
import termios
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _add_worker import message  # the same messages as bench_add.py

from governed_memory import Conversation

FLOCK, IOCTL, LSEEK, WRITE, FSTAT, STAT = (
    fcntl.flock,
    fcntl.ioctl,
    os.lseek,
    os.write,
    os.fstat,
    os.stat,
)
EX, UN, END, FIONREAD = fcntl.LOCK_EX, fcntl.LOCK_UN, os.SEEK_END, termios.FIONREAD
NOTHING = bytes(4)

Timings = dict[str, list[float]]


def one_round(path: Path, batch: list[tuple[str, str]], blocks: list[bytes], out: Timings) -> None:
    """Time every row once, on a fresh agent folder."""
    n = len(batch)

    def timed(label: str, loop: Callable[[], None]) -> None:
        start = time.perf_counter()
        loop()
        out.setdefault(label, []).append((time.perf_counter() - start) / n * 1e6)

    conv = Conversation(name="BenchAgent_conversation", time_enabled=True, memory_md_path=path)
    add = conv.add

    def adds() -> None:
        for role, text in batch:
            add(role, text)

    timed("Conversation.add", adds)
    store: Any = conv.store
    if store is None or store._armed is None:
        sys.exit("bench_add_floor: no inotify here, the store checks with stat on every append")
    dirfd, fd, ifd, pending = store._armed[:4]
    folder, name = str(store.folder), store.memory_path.name
    append = store.append_utf8

    def appends() -> None:
        for block in blocks:
            append(block)

    def floor() -> None:
        for block in blocks:
            FLOCK(dirfd, EX)
            WRITE(fd, block)
            FLOCK(dirfd, UN)

    def ours() -> None:
        for block in blocks:
            FLOCK(dirfd, EX)
            IOCTL(ifd, FIONREAD, pending, True)
            if pending == NOTHING:
                LSEEK(fd, 0, END)
                WRITE(fd, block)
            FLOCK(dirfd, UN)

    def stats() -> None:
        for block in blocks:
            FLOCK(dirfd, EX)
            STAT(folder)
            STAT(name, dir_fd=dirfd)
            WRITE(fd, block)
            FLOCK(dirfd, UN)

    def nlink() -> None:
        for block in blocks:
            FLOCK(dirfd, EX)
            if FSTAT(fd).st_nlink:
                WRITE(fd, block)
            FLOCK(dirfd, UN)

    timed("flock + write + unlock", floor)
    timed("  + FIONREAD + lseek (ours)", ours)
    timed("  + stat folder + stat file (before)", stats)
    timed("  + fstat (nlink, size)", nlink)
    store._end = os.fstat(fd).st_size  # the loops above appended behind its back
    timed("PlaintextAgentStore.append_utf8", appends)
    store.append_utf8 = lambda data: None
    conv.conversation_history.clear()
    timed("Conversation.add, store write stubbed", adds)
    store.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--adds", type=int, default=2_000, help="appends per round")
    parser.add_argument("--rounds", type=int, default=40)
    parser.add_argument("--dir", type=Path, default=None, help="scratch folder")
    args = parser.parse_args(argv)
    scratch = Path(tempfile.mkdtemp(prefix="bench-floor-", dir=args.dir))
    batch = [(("User", "BenchAgent")[i % 2], message(i, 400)) for i in range(args.adds)]
    blocks = [
        f"### {role} \u2014 2026-11-30T10:00:00.000001\n\n{text}\n\n---\n\n".encode()
        for role, text in batch
    ]
    timings: Timings = {}
    try:
        for round_no in range(args.rounds):
            path = scratch / f"r{round_no}" / "agents" / "BenchAgent" / "MEMORY.md"
            one_round(path, batch, blocks, timings)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    width = max(len(label) for label in timings)
    print(f"Per append of a 400-byte message, {args.adds:,} appends x {args.rounds} rounds\n")
    print(f"{'':{width}}  {'best us':>8}  {'median us':>9}")
    for label, values in timings.items():
        print(f"{label:{width}}  {min(values):8.2f}  {statistics.median(values):9.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
