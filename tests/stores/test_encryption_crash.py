"""kill -9 during appends, compactions and key rotation: nothing acknowledged is ever lost.

Each test forks a child that works on a real workspace, SIGKILLs it at a
random moment, many times over, and then checks every acknowledged message
still decrypts (and that an interrupted rotation resumes).
"""

from __future__ import annotations

import os
import random
import select
import signal
import struct
import time
import zlib
from collections.abc import Callable
from pathlib import Path

from crypto_helpers import make_keyring

from governed_memory import memory_md_path, parse_memory
from governed_memory._crypto import KeyChain, LocalKeyProvider
from governed_memory._crypto._keyring import Keyring
from governed_memory._format._records import render_block, render_header
from governed_memory._keys._rotation import REENCRYPT_FILE, rotate
from governed_memory._stores._encrypted import EncryptedAgentStore

HEADER = render_header("crash", "2026-11-30T10:00:00")
KEYS = [LocalKeyProvider(bytes([n]) * 32) for n in range(1, 12)]


def _block(text: str, subject: str | None = None) -> str:
    return render_block(
        "User", "2026-11-30T10:00:01", text, {"subject": subject} if subject else None
    )


def _fork(work: Callable[[int], None]) -> tuple[int, int]:
    """Run ``work(write_fd)`` in a forked child; return (pid, read end of its pipe)."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns
        code = 0
        try:
            os.close(read_end)
            work(write_end)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write_end)
    return pid, read_end


def _kill_after_lines(pid: int, fd: int, lines: int, extra: float) -> bytes:
    """SIGKILL ``pid`` once it has reported ``lines`` lines (or stopped), plus ``extra`` seconds."""
    seen = b""
    while seen.count(b"\n") < lines:
        ready, _, _ = select.select([fd], [], [], 10)
        chunk = os.read(fd, 4096) if ready else b""
        if not chunk:
            break
        seen += chunk
    time.sleep(extra)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return seen


def _kill_after_steps(pid: int, fd: int, steps: int, extra: float) -> bytes:
    """SIGKILL ``pid`` once it has reported ``steps`` progress bytes (or finished), plus
    ``extra`` seconds; return what it reported."""
    seen = b""
    while seen.count(b".") < steps and not seen.endswith(b"d"):
        ready, _, _ = select.select([fd], [], [], 10)
        chunk = os.read(fd, 1) if ready else b""
        if not chunk:
            break
        seen += chunk
    time.sleep(extra)
    os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    return seen


def _drain(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 65536):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


def _contents(store: EncryptedAgentStore) -> list[str]:
    texts = [store.read_archive(p) for p in store.list_archives()] + [store.read_memory() or ""]
    return [r.content for text in texts for r in parse_memory(text).records]


def _torn_frame() -> bytes:
    """The start of a frame whose write a crash cut short (length and CRC intact)."""
    head = b"GF" + struct.pack(">I", 400)
    return head + struct.pack(">I", zlib.crc32(head)) + os.urandom(random.randrange(0, 300))


def test_kill9_during_appends_and_compactions_loses_no_acknowledged_message(
    workspace: Path,
) -> None:
    rng = random.Random(1234)
    folder = workspace / ".governed_memory" / "keyring"
    path = memory_md_path("A", workspace)
    acknowledged: list[str] = []
    for round_ in range(15):

        def work(fd: int, round_: int = round_) -> None:
            store = EncryptedAgentStore(path, lambda: HEADER, keyring=make_keyring(folder))
            for i in range(100_000):
                text = f"r{round_}-m{i}"
                store.append(_block(text, f"s{i % 3}" if i % 2 else None))
                if i % 25 == 24:
                    store.compact(None)
                os.write(fd, (text + "\n").encode())  # acknowledged only once append returned

        pid, read_end = _fork(work)
        # Killed once it has acknowledged a random number of messages (plus a random
        # moment), not after a fixed time: on a loaded machine a timer could fire before
        # the writer got going, and the test would prove less than it says.
        head = _kill_after_lines(pid, read_end, rng.randint(8, 40), rng.uniform(0.0, 0.02))
        this_round = (head + _drain(read_end)).decode().split()
        acknowledged += this_round
        # As if the kill had landed inside a write. Only after a round whose writer
        # appended: its first append cut the previous round's torn tail, as every
        # writer does, so a file holds at most one torn frame. A writer killed before
        # its first append may have cut nothing, and a second tear on top of the first is a
        # state no crash can produce (it read as damage in about 1 case in 5, which
        # failed this test whenever a slow machine killed a writer that early).
        if this_round and rng.random() < 0.4 and path.with_name("MEMORY.md.gmenc").exists():
            with open(path.with_name("MEMORY.md.gmenc"), "ab") as fh:
                fh.write(_torn_frame())
        seen = _contents(EncryptedAgentStore(path, lambda: HEADER, keyring=make_keyring(folder)))
        missing = [m for m in acknowledged if m not in set(seen)]
        assert missing == [], f"round {round_}: acknowledged messages lost: {missing[:5]}"
        # A kill between writing an archive and replacing the memory leaves those
        # records in both (the next compaction archives them again): duplicated,
        # never lost. First occurrences are in acknowledgement order.
        order = [m for m in dict.fromkeys(seen) if m in set(acknowledged)]
        assert order == acknowledged
    assert len(acknowledged) > 100


def _populate(workspace: Path, keyring: Keyring) -> dict[str, list[str]]:
    expected: dict[str, list[str]] = {}
    for agent in ("A", "B"):
        store = EncryptedAgentStore(
            memory_md_path(agent, workspace), lambda: HEADER, keyring=keyring
        )
        for i in range(40):
            store.append(_block(f"{agent}-{i}", f"subject-{i}"))
            if i % 15 == 14:
                store.compact(None)
        store.close()
        expected[agent] = _contents(store)
    return expected


def test_kill9_during_rotation_and_reencryption_resumes_and_loses_nothing(workspace: Path) -> None:
    rng = random.Random(99)
    folder = workspace / ".governed_memory" / "keyring"
    expected = _populate(workspace, make_keyring(folder, KEYS[0]))
    interrupted = 0
    for round_ in range(1, 9):
        chain = KeyChain(KEYS[round_], *KEYS[:round_])

        def work(fd: int, chain: KeyChain = chain, reencrypt: bool = round_ % 2 == 0) -> None:
            def step(phase: str, done: int, total: int) -> None:
                os.write(fd, b".")  # one byte per keyring entry (or agent) finished

            rotate(workspace, make_keyring(folder, chain), reencrypt_data=reencrypt, progress=step)
            os.write(fd, b"done")

        pid, read_end = _fork(work)
        # Kill after a random number of finished steps, then a random fraction of the next one.
        reported = _kill_after_steps(pid, read_end, rng.randrange(1, 40), rng.uniform(0, 0.003))
        interrupted += not (reported + _drain(read_end)).endswith(b"done")
        # Whatever state the kill left, all data still decrypts with the keys in play.
        for agent, records in expected.items():
            store = EncryptedAgentStore(
                memory_md_path(agent, workspace),
                lambda: HEADER,
                keyring=make_keyring(folder, chain),
            )
            assert _contents(store) == records
    assert interrupted >= 5  # the kills did land mid-rotation
    final = KeyChain(KEYS[9], *KEYS[:9])
    rotate(workspace, make_keyring(folder, final), reencrypt_data=True)
    assert not (folder / REENCRYPT_FILE).exists()
    only_new = make_keyring(folder, KEYS[9])
    for _, entry in only_new.entries():
        assert {w["wrapped_by"] for w in entry.keys.values()} <= {KEYS[9].key_id}
        assert len(entry.keys) <= 1
    for agent, records in expected.items():
        store = EncryptedAgentStore(
            memory_md_path(agent, workspace), lambda: HEADER, keyring=only_new
        )
        assert _contents(store) == records
