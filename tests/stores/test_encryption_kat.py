"""Known-answer files: the encrypted on-disk format (files and keyring) is pinned byte for byte.

``tests/fixtures/encryption-v1/`` was written by :func:`build` with every
random source and the clock pinned. If this test fails, the format changed:
files written by earlier releases would no longer read. Bump the format
version instead (and keep reading version 1). To regenerate after a deliberate
change: ``python tests/test_encryption_kat.py``.
"""

from __future__ import annotations

import datetime as dt
import shutil
import sys
from pathlib import Path

from crypto_helpers import TEST_MASTER_KEY

from governed_memory import FixedClock, memory_md_path
from governed_memory._crypto import Keyring, LocalKeyProvider
from governed_memory._format._records import render_block, render_header
from governed_memory._stores._encrypted import EncryptedAgentStore
from governed_memory.testing import SeededRandom

FIXTURE = Path(__file__).parents[1] / "fixtures" / "encryption-v1"
HEADER = render_header("KatAgent_id_1_conversation", "2026-11-30T10:00:00")
BLOCKS = [
    render_block("Human", "2026-11-30T10:00:01", "What is my balance?", {"subject": "customer-42"}),
    render_block("KatAgent", "2026-11-30T10:00:02", "It is 12.50 EUR."),
    render_block("System", "2026-11-30T10:00:03", "[Compressed Memory Summary]\nBalance asked."),
    render_block("Human", "2026-11-30T10:00:04", "Thanks — bye", {"subject": "customer-42"}),
]


def _store(root: Path, *, pinned: bool) -> EncryptedAgentStore:
    clock = FixedClock(dt.datetime(2026, 11, 30, 10, 0, 0))
    random = SeededRandom(b"kat") if pinned else None
    provider = LocalKeyProvider(TEST_MASTER_KEY, random=random or SeededRandom(b"unused"))
    keyring = Keyring(
        root / "keyring",
        provider,
        clock=clock,
        **({"random": SeededRandom(b"keys")} if pinned else {}),
    )
    return EncryptedAgentStore(
        memory_md_path("KatAgent", root / "workspace"),
        lambda: HEADER,
        keyring=keyring,
        clock=clock,
        **({"random": SeededRandom(b"frames")} if pinned else {}),
    )


def build(root: Path) -> None:
    """Write the known-answer workspace and keyring into ``root``."""
    store = _store(root, pinned=True)
    store.append(BLOCKS[0])
    store.append(BLOCKS[1])
    store.compact(BLOCKS[2])
    store.append(BLOCKS[3])
    store.close()


def _files(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def test_pinned_sources_reproduce_the_fixture_byte_for_byte(tmp_path: Path) -> None:
    build(tmp_path)
    assert _files(tmp_path) == _files(FIXTURE)


def test_the_fixture_decrypts_to_the_expected_text(tmp_path: Path) -> None:
    shutil.copytree(FIXTURE, tmp_path / "copy")
    store = _store(tmp_path / "copy", pinned=False)
    assert store.read_memory() == HEADER + BLOCKS[2] + BLOCKS[3]
    (archive,) = store.list_archives()
    assert store.archive_file(archive).name == "history_2026-11-30_10-00-00.gmenc"
    assert store.read_archive(archive) == HEADER + BLOCKS[0] + BLOCKS[1]
    assert sorted(_files(FIXTURE)) == [
        "keyring/epoch",
        "keyring/keyring.json",
        *sorted(f"keyring/keys/{p.name}" for p in (FIXTURE / "keyring" / "keys").iterdir()),
        "workspace/agents/KatAgent/MEMORY.md.gmenc",
        "workspace/agents/KatAgent/archive/history_2026-11-30_10-00-00.gmenc",
    ]


def test_the_fixture_header_starts_with_magic_and_version_1() -> None:
    data = (FIXTURE / "workspace" / "agents" / "KatAgent" / "MEMORY.md.gmenc").read_bytes()
    assert data[:10] == b"\x89GMENC\r\n\x00\x01"


if __name__ == "__main__":  # regenerate after a deliberate format change
    shutil.rmtree(FIXTURE, ignore_errors=True)
    build(FIXTURE)
    print(f"wrote {FIXTURE}", file=sys.stderr)
