"""Symbolic links inside an agent's folder tree are refused by every store operation.

The library never makes a link in ``agents/<agent>/``: one there could lead out
of the workspace (issue 13, finding 1). Whatever the operation, a link in the
place of the agent folder, the memory file, ``archive/``, an archive,
``subjects/`` or a subject folder raises UnsafePathError naming it, and
nothing outside the workspace is written, chmodded, read or deleted. The
workspace folder and ``agents/`` themselves may be links an operator made.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from governed_memory import AgentStore, Clock, FixedClock, StorageError
from governed_memory._errors import UnsafePathError
from governed_memory._format import render_block, render_header

CLOCK = FixedClock(dt.datetime(2026, 11, 30, 10))  # archives: history_2026-11-30_10-00-00
SECRET = b"outside the workspace: never touched\n"
StoreMaker = Callable[[Path, Callable[[], str], Clock], AgentStore]  # the store_factory fixture's


def _header() -> str:
    return render_header("A_conversation", "2026-11-30T10:00:00")


def _block(text: str, subject: str | None = None) -> str:
    meta = {"subject": subject} if subject else None
    return render_block("Human", "2026-11-30T10:00:01", text, meta)


def _snapshot(root: Path) -> dict[str, tuple[bytes | None, int]]:
    """Every entry under ``root`` (and root itself): bytes for files, and mode."""
    found: dict[str, tuple[bytes | None, int]] = {".": (None, root.lstat().st_mode)}
    for path in sorted(root.rglob("*")):
        st = path.lstat()
        data = path.read_bytes() if path.is_file() and not path.is_symlink() else None
        found[path.relative_to(root).as_posix()] = (data, st.st_mode)
    return found


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder outside the workspace, mode 0755, holding a file, mode 0644."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "secret.txt").write_bytes(SECRET)
    os.chmod(folder / "secret.txt", 0o644)
    os.chmod(folder, 0o755)
    return folder


def _store(make: StoreMaker, workspace: Path, agent: str = "A") -> AgentStore:
    return make(workspace / "agents" / agent / "MEMORY.md", _header, CLOCK)


def _memory_name(store: AgentStore) -> str:
    return store.source()  # MEMORY.md or MEMORY.md.gmenc


def _every_operation(store: AgentStore) -> dict[str, Callable[[], object]]:
    def delete() -> None:
        with store.lock():
            store.delete()

    return {
        "ensure": store.ensure,
        "append": lambda: store.append(_block("hello")),
        "read_memory": store.read_memory,
        "compact": lambda: store.compact(_block("summary")),
        "rewrite_memory": lambda: store.rewrite_memory(_header()),
        "list_archives": store.list_archives,
        "read_archive": lambda: store.read_archive("history_2026-11-30_10-00-00"),
        "rewrite_archive": lambda: store.rewrite_archive("history_2026-11-30_10-00-00", "x"),
        "stat": store.stat,
        "subject_stores": store.subject_stores,
        "subject_append": lambda: store.subject_store("alice").append(_block("hi", "alice")),
        "remove_temps": store.remove_temps,
        "delete": delete,
    }


OPERATIONS = [
    "ensure",
    "append",
    "read_memory",
    "compact",
    "rewrite_memory",
    "list_archives",
    "read_archive",
    "rewrite_archive",
    "stat",
    "subject_stores",
    "subject_append",
    "remove_temps",
    "delete",
]


@pytest.mark.parametrize("operation", OPERATIONS)
def test_a_symlinked_agent_folder_is_refused_by_every_operation(
    store_factory: StoreMaker, workspace: Path, outside: Path, operation: str
) -> None:
    """agents/Evil -> /outside: nothing is written, chmodded or deleted there."""
    (workspace / "agents").mkdir()
    (workspace / "agents" / "Evil").symlink_to(outside)
    before = _snapshot(outside)
    store = _store(store_factory, workspace, "Evil")
    try:
        with pytest.raises(UnsafePathError) as caught:
            _every_operation(store)[operation]()
    finally:
        store.close()
    assert caught.value.path == workspace / "agents" / "Evil"
    assert "symbolic link" in str(caught.value)
    assert "Replace it by the folder it points to, or remove it" in str(caught.value)
    assert _snapshot(outside) == before
    assert (workspace / "agents" / "Evil").is_symlink()


def test_a_dangling_agent_link_is_refused_not_created_through(
    store_factory: StoreMaker, workspace: Path, tmp_path: Path
) -> None:
    (workspace / "agents").mkdir()
    (workspace / "agents" / "Evil").symlink_to(tmp_path / "not-yet")
    store = _store(store_factory, workspace, "Evil")
    try:
        with pytest.raises(UnsafePathError):
            store.append(_block("hello"))
        with pytest.raises(UnsafePathError):
            store.read_memory()
    finally:
        store.close()
    assert not (tmp_path / "not-yet").exists()


def test_the_error_is_a_storage_error(store_factory: StoreMaker, workspace: Path) -> None:
    (workspace / "agents").mkdir()
    (workspace / "agents" / "Evil").symlink_to(workspace)
    store = _store(store_factory, workspace, "Evil")
    with pytest.raises(StorageError):
        store.read_memory()
    store.close()


MEMORY_OPERATIONS = ["ensure", "append", "read_memory", "compact", "rewrite_memory", "stat"]


@pytest.mark.parametrize("operation", MEMORY_OPERATIONS)
def test_a_symlinked_memory_file_is_refused(
    store_factory: StoreMaker, workspace: Path, outside: Path, operation: str
) -> None:
    """agents/A/MEMORY.md -> /outside/secret.txt: not appended to, read or chmodded."""
    store = _store(store_factory, workspace)
    store.append(_block("first"))
    name = _memory_name(store)
    store.close()
    memory = workspace / "agents" / "A" / name
    memory.unlink()
    memory.symlink_to(outside / "secret.txt")
    before = _snapshot(outside)
    store = _store(store_factory, workspace)
    try:
        with pytest.raises(UnsafePathError) as caught:
            _every_operation(store)[operation]()
    finally:
        store.close()
    assert caught.value.path == memory
    assert _snapshot(outside) == before


def test_the_encrypted_store_refuses_a_plaintext_memory_link_too(
    workspace: Path, outside: Path, tmp_path: Path
) -> None:
    from governed_memory import EncryptedAgentStore, Keyring, LocalKeyProvider

    keyring = Keyring(tmp_path / "keyring", LocalKeyProvider(bytes(range(32))))
    folder = workspace / "agents" / "A"
    folder.mkdir(parents=True)
    (folder / "MEMORY.md").symlink_to(outside / "secret.txt")
    store = EncryptedAgentStore(folder / "MEMORY.md", _header, keyring=keyring, clock=CLOCK)
    try:
        for operation in ("append", "read_memory", "compact", "ensure"):
            with pytest.raises(UnsafePathError):
                _every_operation(store)[operation]()
    finally:
        store.close()
    assert (outside / "secret.txt").read_bytes() == SECRET


ARCHIVE_OPERATIONS = [
    "compact",
    "list_archives",
    "read_archive",
    "rewrite_archive",
    "remove_temps",
]


def _with_archive(make: StoreMaker, workspace: Path) -> AgentStore:
    store = _store(make, workspace)
    store.append(_block("archived"))
    assert store.compact(None) == "history_2026-11-30_10-00-00"
    store.append(_block("active"))
    return store


@pytest.mark.parametrize("operation", ARCHIVE_OPERATIONS)
def test_a_symlinked_archive_folder_is_refused(
    store_factory: StoreMaker, workspace: Path, outside: Path, operation: str
) -> None:
    store = _with_archive(store_factory, workspace)
    store.close()
    archive = workspace / "agents" / "A" / "archive"
    for item in archive.iterdir():  # the same names outside, so a follow would find them
        (outside / item.name).write_bytes(item.read_bytes())
        item.unlink()
    archive.rmdir()
    archive.symlink_to(outside)
    before = _snapshot(outside)
    store = _store(store_factory, workspace)
    try:
        with pytest.raises(UnsafePathError) as caught:
            _every_operation(store)[operation]()
        assert caught.value.path == archive
    finally:
        store.close()
    assert _snapshot(outside) == before


@pytest.mark.parametrize("operation", ["list_archives", "read_archive", "rewrite_archive"])
def test_a_symlinked_archive_file_is_refused(
    store_factory: StoreMaker, workspace: Path, outside: Path, operation: str
) -> None:
    store = _with_archive(store_factory, workspace)
    [archive_id] = store.list_archives()
    store.close()
    path = next((workspace / "agents" / "A" / "archive").iterdir())
    (outside / path.name).write_bytes(path.read_bytes())
    path.unlink()
    path.symlink_to(outside / path.name)
    before = _snapshot(outside)
    store = _store(store_factory, workspace)
    try:
        with pytest.raises(UnsafePathError) as caught:
            _every_operation(store)[operation]()
        assert caught.value.path == path
        with pytest.raises(UnsafePathError):
            store.stat(archive_id)
    finally:
        store.close()
    assert _snapshot(outside) == before


def _subject_folder(make: StoreMaker, workspace: Path) -> tuple[Path, Path]:
    """The agent A with alice's subject memory; (subjects/ folder, alice's folder)."""
    store = _store(make, workspace)
    store.append(_block("shared"))
    alice = store.subject_store("alice")
    alice.append(_block("alice's IBAN", "alice"))
    alice.compact(_block("alice summary", "alice"))
    folder = alice.folder  # type: ignore[attr-defined]
    alice.close()
    store.close()
    return folder.parent, folder


@pytest.mark.parametrize("link", ["subjects", "subject folder"])
def test_a_symlinked_subject_folder_is_refused(
    store_factory: StoreMaker, workspace: Path, outside: Path, link: str
) -> None:
    subjects, alice = _subject_folder(store_factory, workspace)
    target = subjects if link == "subjects" else alice
    moved = outside / "moved"
    target.rename(moved)  # the same files, now outside: a follow would reach them
    target.symlink_to(moved)
    before = _snapshot(outside)
    store = _store(store_factory, workspace)
    try:
        for operation in ("subject_stores", "subject_append", "remove_temps"):
            with pytest.raises(UnsafePathError) as caught:
                _every_operation(store)[operation]()
            assert caught.value.path == target
        alice_store = store.subject_store("alice")
        for operation in ("read_memory", "compact", "list_archives", "rewrite_memory"):
            with pytest.raises(UnsafePathError):
                _every_operation(alice_store)[operation]()
        alice_store.close()
        with store.lock():
            store.delete()  # removes the link itself, never what it points to
    finally:
        store.close()
    assert _snapshot(outside) == before
    assert not (workspace / "agents" / "A").exists()


def test_a_symlinked_workspace_and_agents_folder_are_the_operators_and_followed(
    store_factory: StoreMaker, tmp_path: Path
) -> None:
    real = tmp_path / "real-ws"
    (real / "agents-real").mkdir(parents=True)
    (real / "agents").symlink_to(real / "agents-real")
    workspace = tmp_path / "ws-link"
    workspace.symlink_to(real)
    store = _store(store_factory, workspace)
    store.append(_block("hello"))
    store.compact(None)
    alice = store.subject_store("alice")
    alice.append(_block("hi", "alice"))
    assert [s.partition for s in store.subject_stores()] == [alice.partition]
    alice.close()
    assert len(store.list_archives()) == 1
    store.close()
    assert (real / "agents-real" / "A" / "archive").is_dir()


# -- temporary files a crash left (finding 7) ---------------------------------


def _plant_temps(folder: Path) -> list[Path]:
    planted = []
    for where in (folder, folder / "archive"):
        where.mkdir(exist_ok=True)
        path = where / ".gm-tmp-deadbeef00000000"
        path.write_bytes(b"the old memory, with alice's IBAN")
        planted.append(path)
    return planted


def test_remove_temps_clears_the_agent_folder_archive_and_every_subject_tree(
    store_factory: StoreMaker, workspace: Path
) -> None:
    """A compaction killed at the link step leaves archive/.gm-tmp-* with the old text."""
    _subjects, alice = _subject_folder(store_factory, workspace)
    planted = _plant_temps(workspace / "agents" / "A") + _plant_temps(alice)
    store = _store(store_factory, workspace)
    try:
        assert store.remove_temps() == len(planted)
        assert not any(p.exists() for p in planted)
        assert store.remove_temps() == 0
        [mine] = store.subject_stores()
        assert "alice summary" in (mine.read_memory() or "")
        mine.close()
        assert store.list_archives() == []  # alice's archive is her own store's
    finally:
        store.close()


def test_remove_temps_of_a_missing_agent_is_zero_and_creates_nothing(
    store_factory: StoreMaker, workspace: Path
) -> None:
    store = _store(store_factory, workspace, "Nobody")
    assert store.remove_temps() == 0
    store.close()
    assert not (workspace / "agents" / "Nobody").exists()


@pytest.mark.parametrize("operation", ["compact", "rewrite_memory", "rewrite_archive"])
def test_compaction_and_rewrites_clear_stale_temps_in_the_folder_and_archive(
    store_factory: StoreMaker, workspace: Path, operation: str
) -> None:
    store = _with_archive(store_factory, workspace)
    planted = _plant_temps(workspace / "agents" / "A")
    _every_operation(store)[operation]()
    store.close()
    assert not any(p.exists() for p in planted)


# -- through a Conversation ------------------------------------------------------


@pytest.mark.parametrize("kind", ["plaintext", "encrypted"])
@pytest.mark.parametrize("link", ["agent folder", "memory"])
def test_a_conversation_on_a_link_neither_preloads_adds_nor_compacts(
    workspace: Path, outside: Path, kind: str, link: str
) -> None:
    """agents/Evil -> /outside: the reference appends there and chmods it 0700."""
    from subjects_helpers import conversation, governance

    gov = governance(workspace, CLOCK, kind=kind)
    agent = workspace / "agents" / "Evil"
    if link == "agent folder":
        agent.parent.mkdir()
        agent.symlink_to(outside)
    else:
        agent.mkdir(parents=True)
        name = "MEMORY.md.gmenc" if kind == "encrypted" else "MEMORY.md"
        (agent / name).symlink_to(outside / "secret.txt")
    before = _snapshot(outside)
    with pytest.raises(UnsafePathError):
        conv = conversation(gov, "Evil")
        conv.add("Human", "hello")
        conv.compact("summary")
    assert _snapshot(outside) == before
