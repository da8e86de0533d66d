"""encrypt-workspace, decrypt-workspace and re-encryption refuse links in an agent's tree.

A symbolic link in the place of an agent folder, a memory file, ``archive/``,
an archive, ``subjects/`` or a subject folder stops the run with
UnsafePathError naming it (issue 13, finding 1): skipping it would leave that
memory unconverted (and a re-encryption then retires the keys it needs),
following it would read, write and delete outside the workspace.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import pytest
from crypto_helpers import make_keyring

from governed_memory import FixedClock, PlaintextAgentStore, memory_md_path
from governed_memory._crypto._keyring import Keyring
from governed_memory._crypto._providers import KeyChain, LocalKeyProvider
from governed_memory._errors import UnsafePathError
from governed_memory._format._records import render_block, render_header
from governed_memory._keys._migration import decrypt_workspace, encrypt_workspace
from governed_memory._keys._rotation import rotate
from governed_memory._stores._encrypted import EncryptedAgentStore

CLOCK = FixedClock(dt.datetime(2026, 11, 30, 10))
LINKS = ["agent folder", "memory", "archive", "archive file", "subjects", "subject folder"]


def _header() -> str:
    return render_header("conv", "2026-11-30T10:00:00")


def _block(text: str, subject: str | None = None) -> str:
    meta = {"subject": subject} if subject else None
    return render_block("Human", "2026-11-30T10:00:01", text, meta)


def _populate(workspace: Path, store: Callable[[Path], PlaintextAgentStore]) -> None:
    """Agents A and B: each a memory, an archive and alice's subject memory with an archive."""
    for agent in ("A", "B"):
        own = store(memory_md_path(agent, workspace))
        own.append(_block(f"{agent} archived"))
        own.compact(_block(f"{agent} summary"))
        alice = own.subject_store("alice")
        alice.append(_block(f"{agent} alice", "alice"))
        alice.compact(_block(f"{agent} alice summary", "alice"))
        alice.close()
        own.close()


def _keyring(workspace: Path) -> Keyring:
    return make_keyring(workspace.parent / "keyring")


def _target(workspace: Path, link: str) -> Path:
    agent = workspace / "agents" / "B"
    subjects = agent / "subjects"
    alice = next(subjects.iterdir())
    memory = next(p for p in agent.iterdir() if p.name.startswith("MEMORY.md"))
    archive_file = next((agent / "archive").iterdir())
    return {
        "agent folder": agent,
        "memory": memory,
        "archive": agent / "archive",
        "archive file": archive_file,
        "subjects": subjects,
        "subject folder": alice,
    }[link]


def _move_out(path: Path, outside: Path) -> None:
    outside.mkdir()
    moved = outside / path.name
    path.rename(moved)
    path.symlink_to(moved)


def _snapshot(root: Path) -> dict[str, tuple[bytes | None, int]]:
    found: dict[str, tuple[bytes | None, int]] = {}
    for path in sorted(root.rglob("*")):
        data = path.read_bytes() if path.is_file() else None
        found[path.relative_to(root).as_posix()] = (data, path.lstat().st_mode)
    return found


@pytest.mark.parametrize("link", LINKS)
def test_encrypt_workspace_stops_at_a_link_and_leaves_its_target_alone(
    workspace: Path, tmp_path: Path, link: str
) -> None:
    _populate(workspace, lambda p: PlaintextAgentStore(p, _header, clock=CLOCK))
    target = _target(workspace, link)
    _move_out(target, tmp_path / "outside")
    before = _snapshot(tmp_path / "outside")
    with pytest.raises(UnsafePathError) as caught:
        encrypt_workspace(workspace, _keyring(workspace))
    assert caught.value.path == target
    assert _snapshot(tmp_path / "outside") == before
    assert target.is_symlink()


@pytest.mark.parametrize("link", LINKS)
def test_decrypt_workspace_stops_at_a_link_and_leaves_its_target_alone(
    workspace: Path, tmp_path: Path, link: str
) -> None:
    keyring = _keyring(workspace)
    _populate(
        workspace,
        lambda p: EncryptedAgentStore(p, _header, keyring=keyring, clock=CLOCK),  # type: ignore[arg-type,return-value]
    )
    target = _target(workspace, link)
    _move_out(target, tmp_path / "outside")
    before = _snapshot(tmp_path / "outside")
    with pytest.raises(UnsafePathError) as caught:
        decrypt_workspace(workspace, keyring)
    assert caught.value.path == target
    assert _snapshot(tmp_path / "outside") == before


@pytest.mark.parametrize("link", LINKS)
def test_reencryption_stops_at_a_link_before_retiring_any_key(
    workspace: Path, tmp_path: Path, link: str
) -> None:
    old = LocalKeyProvider(bytes(range(32)))
    keyring = make_keyring(workspace.parent / "keyring", old)
    _populate(
        workspace,
        lambda p: EncryptedAgentStore(p, _header, keyring=keyring, clock=CLOCK),  # type: ignore[arg-type,return-value]
    )
    target = _target(workspace, link)
    _move_out(target, tmp_path / "outside")
    before = _snapshot(tmp_path / "outside")
    new = LocalKeyProvider(bytes(range(1, 33)))
    rotating = make_keyring(workspace.parent / "keyring", KeyChain(new, old))
    with pytest.raises(UnsafePathError) as caught:
        rotate(workspace, rotating, reencrypt_data=True)
    assert caught.value.path == target
    assert _snapshot(tmp_path / "outside") == before
    generations = [sorted(entry.keys) for _, entry in rotating.entries() if entry.keys]
    assert any(len(gens) > 1 for gens in generations)  # nothing retired: resumable once fixed


def test_a_temp_file_a_crash_left_in_a_subject_archive_is_removed_by_encryption(
    workspace: Path,
) -> None:
    """A compaction killed at the link step leaves the old plaintext in archive/.gm-tmp-*."""
    _populate(workspace, lambda p: PlaintextAgentStore(p, _header, clock=CLOCK))
    alice = next((workspace / "agents" / "A" / "subjects").iterdir())
    planted = alice / "archive" / ".gm-tmp-0123456789abcdef"
    planted.write_text("A alice, in plaintext")
    encrypt_workspace(workspace, _keyring(workspace))
    assert not planted.exists()
