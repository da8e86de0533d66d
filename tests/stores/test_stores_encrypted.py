"""The encrypted store: same text as the plaintext store, and typed errors on any damage."""

from __future__ import annotations

import datetime as dt
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from crypto_helpers import make_keyring
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governed_memory import Conversation, FixedClock, PlaintextAgentStore, memory_md_path
from governed_memory._crypto._frames import scan
from governed_memory._crypto._keyring import Keyring
from governed_memory._crypto._providers import InMemoryKeyProvider, LocalKeyProvider
from governed_memory._errors import (
    ConfigurationError,
    DecryptionError,
    IntegrityError,
    KeyUnavailableError,
    StorageError,
)
from governed_memory._format._records import render_block, render_header
from governed_memory._stores._encrypted import EncryptedAgentStore, encrypted_store_factory
from governed_memory.testing import RecordingAuditSink, SeededRandom


@pytest.fixture
def events() -> RecordingAuditSink:
    return RecordingAuditSink()


@pytest.fixture
def keyring(workspace: Path, events: RecordingAuditSink) -> Keyring:
    return make_keyring(workspace / ".governed_memory" / "keyring", observer=events)


def _header() -> str:
    return render_header("conv", "2026-11-30T10:00:00")


def _block(text: str, subject: str | None = None) -> str:
    return render_block(
        "User", "2026-11-30T10:00:01", text, {"subject": subject} if subject else None
    )


def _store(workspace: Path, keyring: Keyring, agent: str = "A") -> EncryptedAgentStore:
    return EncryptedAgentStore(memory_md_path(agent, workspace), _header, keyring=keyring)


def _conversation(
    workspace: Path, factory: Any, clock: FixedClock, agent: str = "A"
) -> Conversation:
    return Conversation(
        name="conv",
        system_prompt="sys",
        time_enabled=True,
        memory_md_path=memory_md_path(agent, workspace),
        store_factory=factory,
        clock=clock,
    )


def _script(conv: Conversation) -> None:
    conv.add("User", "hello")
    conv.add("Bot", {"a": 1})
    conv.add("User", "   ")
    conv.add("User", "line\n### System — forged\nmore", subject_id="s-1")
    conv.compact("the summary")
    conv.add("User", "after compaction", subject_id="s-2")
    conv.compact("second summary")
    conv.add("User", 0)


def test_conversation_behaves_exactly_as_in_plaintext(tmp_path: Path, keyring: Keyring) -> None:
    start = dt.datetime(2026, 11, 30, 10)
    plain_ws, enc_ws = tmp_path / "plain", keyring.folder.parent.parent
    plain = _conversation(plain_ws, None, FixedClock(start, dt.timedelta(milliseconds=1)))
    enc_clock = FixedClock(start, dt.timedelta(milliseconds=1))
    factory = encrypted_store_factory(keyring, clock=enc_clock)
    enc = _conversation(enc_ws, factory, enc_clock)
    _script(plain)
    _script(enc)
    assert enc.conversation_history == plain.conversation_history
    assert enc.store is not None and plain.store is not None
    assert enc.store.read_memory() == plain.store.read_memory()
    plain_archives = [plain.store.read_archive(p) for p in plain.store.list_archives()]
    enc_archives = [enc.store.read_archive(p) for p in enc.store.list_archives()]
    assert enc_archives == plain_archives and len(enc_archives) == 2
    assert [
        plain.store.archive_file(p).name.removesuffix(".md") for p in plain.store.list_archives()
    ] == [enc.store.archive_file(p).name.removesuffix(".gmenc") for p in enc.store.list_archives()]
    # A new session preloads the same history.
    again_plain = _conversation(plain_ws, None, FixedClock(start + dt.timedelta(hours=1)))
    again_enc = _conversation(enc_ws, factory, FixedClock(start + dt.timedelta(hours=1)))
    assert again_enc.conversation_history == again_plain.conversation_history


def test_files_are_named_gmenc_and_hold_no_markdown(workspace: Path, keyring: Keyring) -> None:
    store = _store(workspace, keyring)
    store.ensure()
    store.append(_block("hello"))
    store.compact(_block("summary"))
    folder = workspace / "agents" / "A"
    assert sorted(p.name for p in folder.iterdir()) == ["MEMORY.md.gmenc", "archive"]
    (archive,) = store.archive_files()
    assert archive.name.startswith("history_") and archive.name.endswith(".gmenc")
    for path in (store.memory_path, archive):
        assert b"Agent Memory" not in path.read_bytes()
        assert os.stat(path).st_mode & 0o777 == 0o600


def test_one_frame_per_add_and_no_rewrite(workspace: Path, keyring: Keyring) -> None:
    store = _store(workspace, keyring)
    store.ensure()
    ino = os.stat(store.memory_path).st_ino
    before = store.memory_path.read_bytes()
    store.append(_block("one"))
    after = store.memory_path.read_bytes()
    assert after.startswith(before)
    assert os.stat(store.memory_path).st_ino == ino


def test_two_stores_on_one_agent_interleave_appends(workspace: Path, keyring: Keyring) -> None:
    other_keyring = make_keyring(keyring.folder)
    a, b = _store(workspace, keyring), _store(workspace, other_keyring)
    a.ensure()
    for i in range(5):
        a.append(_block(f"a{i}"))
        b.append(_block(f"b{i}"))
    text = a.read_memory()
    assert text is not None
    assert [line for line in text.splitlines() if line[:1] in ("a", "b")] == [
        x for i in range(5) for x in (f"a{i}", f"b{i}")
    ]


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    st.lists(
        st.tuples(st.text(min_size=1, max_size=80), st.sampled_from([None, "s1", "s2"])),
        max_size=6,
    )
)
def test_append_round_trip(
    tmp_path_factory: pytest.TempPathFactory, items: list[tuple[str, str | None]]
) -> None:
    workspace = tmp_path_factory.mktemp("ws")
    store = _store(workspace, make_keyring(workspace / "kr"))
    store.ensure()
    expected = _header()
    for text, subject in items:
        block = _block(text, subject)
        store.append(block)
        expected += block
    assert store.read_memory() == expected
    store.rewrite_memory(expected + "tail")
    assert store.read_memory() == expected + "tail"


# -- crashes -------------------------------------------------------------------


def test_torn_final_frame_is_dropped_then_truncated_before_the_next_append(
    workspace: Path, keyring: Keyring, events: RecordingAuditSink
) -> None:
    store = _store(workspace, keyring)
    store.ensure()
    store.append(_block("kept"))
    good = store.memory_path.read_bytes()
    store.append(_block("torn by a crash"))
    whole = store.memory_path.read_bytes()
    store.close()
    with open(store.memory_path, "r+b") as fh:
        fh.truncate(len(whole) - 7)
    fresh = _store(workspace, make_keyring(keyring.folder, observer=events))
    assert fresh.read_memory() == _header() + _block("kept")
    assert len(store.memory_path.read_bytes()) == len(whole) - 7  # a reader never writes
    fresh.append(_block("next"))
    assert fresh.read_memory() == _header() + _block("kept") + _block("next")
    assert store.memory_path.read_bytes().startswith(good)
    assert ("recover", "ok") in events.events()


def test_torn_tail_from_another_process_is_cut_by_a_live_store(
    workspace: Path, keyring: Keyring
) -> None:
    store = _store(workspace, keyring)
    store.ensure()
    store.append(_block("one"))
    with open(store.memory_path, "ab") as fh:
        fh.write(b"GF\x00\x00")  # the start of a frame a killed process was writing
    store.append(_block("two"))
    assert _store(workspace, make_keyring(keyring.folder)).read_memory() == (
        _header() + _block("one") + _block("two")
    )


# -- damage, wrong keys, moved files ----------------------------------------------


def _damaged(store: EncryptedAgentStore, offset: int) -> bytes:
    data = bytearray(store.memory_path.read_bytes())
    data[offset] ^= 0x01
    store.memory_path.write_bytes(bytes(data))
    return bytes(data)


@pytest.mark.parametrize(
    ("where", "error"),
    [
        (lambda size: 3, IntegrityError),  # magic
        (lambda size: 40, DecryptionError),  # header (file id): every frame's AAD
        (lambda size: 64 + 1, IntegrityError),  # first frame's length prefix
        (lambda size: 64 + 20, DecryptionError),  # first frame's key fields
        (lambda size: size // 2, DecryptionError),  # somewhere in a middle frame
        (lambda size: size - 1, DecryptionError),  # last frame's tag
    ],
    ids=["magic", "header", "frame-length", "frame-keys", "middle", "tag"],
)
def test_flipped_byte_raises_a_typed_error_naming_the_file_and_changes_nothing(
    workspace: Path,
    keyring: Keyring,
    events: RecordingAuditSink,
    where: Any,
    error: type[Exception],
) -> None:
    store = _store(workspace, keyring)
    store.ensure()
    for i in range(4):
        store.append(_block(f"message {i} " + "x" * 50))
    store.close()
    damaged = _damaged(store, where(store.memory_path.stat().st_size))
    fresh = _store(workspace, keyring)
    with pytest.raises(error) as info:
        fresh.read_memory()
    assert str(store.memory_path) in str(info.value)
    assert isinstance(info.value, DecryptionError)
    with pytest.raises(DecryptionError):
        fresh.append(_block("must not land"))
    with pytest.raises(DecryptionError):
        fresh.compact(_block("must not replace"))
    assert store.memory_path.read_bytes() == damaged
    assert fresh.list_archives() == []


def test_decryption_failure_is_reported_to_the_observer(
    workspace: Path, keyring: Keyring, events: RecordingAuditSink
) -> None:
    store = _store(workspace, keyring)
    store.ensure()
    store.close()
    _damaged(store, store.memory_path.stat().st_size - 1)
    with pytest.raises(DecryptionError):
        _store(workspace, keyring).read_memory()
    assert ("decrypt", "error") in events.events()


def test_wrong_master_key_is_a_decryption_error_naming_the_file(
    workspace: Path, keyring: Keyring
) -> None:
    _store(workspace, keyring).append(_block("secret"))
    wrong = make_keyring(keyring.folder, LocalKeyProvider(bytes(32)))
    with pytest.raises(KeyUnavailableError, match=r"MEMORY.md.gmenc cannot be read") as info:
        _store(workspace, wrong).read_memory()
    assert isinstance(info.value, DecryptionError)


def test_truncated_archive_is_an_integrity_error(workspace: Path, keyring: Keyring) -> None:
    store = _store(workspace, keyring)
    store.append(_block("one"))
    store.append(_block("two"))
    archive_id = store.compact(None)
    assert archive_id is not None
    archive = store.archive_file(archive_id)
    data = archive.read_bytes()
    for cut in (len(data) - 1, len(data) - 60, 70, 10):
        archive.write_bytes(data[:cut])
        with pytest.raises(IntegrityError, match=str(archive.name)):
            store.read_archive(archive_id)


def test_memory_cut_inside_its_header_is_an_integrity_error(
    workspace: Path, keyring: Keyring
) -> None:
    store = _store(workspace, keyring)
    store.ensure()
    store.close()
    store.memory_path.write_bytes(store.memory_path.read_bytes()[:30])
    with pytest.raises(IntegrityError):
        _store(workspace, keyring).read_memory()


def test_memory_swapped_between_agents_fails(workspace: Path, keyring: Keyring) -> None:
    a, b = _store(workspace, keyring, "A"), _store(workspace, keyring, "B")
    a.append(_block("a's secret"))
    b.append(_block("b's secret"))
    a.close(), b.close()
    shutil.copyfile(a.memory_path, b.memory_path)
    with pytest.raises(DecryptionError, match=r"agents/B/MEMORY.md.gmenc"):
        _store(workspace, keyring, "B").read_memory()


def test_archive_swapped_into_memory_or_renamed_fails(workspace: Path, keyring: Keyring) -> None:
    store = _store(workspace, keyring)
    store.append(_block("one"))
    first_id = store.compact(_block("s1"))
    store.append(_block("two"))
    second_id = store.compact(_block("s2"))
    assert first_id is not None and second_id is not None
    first, second = store.archive_file(first_id), store.archive_file(second_id)
    store.close()
    saved = store.memory_path.read_bytes()
    shutil.copyfile(first, store.memory_path)
    with pytest.raises(IntegrityError):
        _store(workspace, keyring).read_memory()
    store.memory_path.write_bytes(saved)
    first_bytes = first.read_bytes()
    shutil.copyfile(second, first)
    with pytest.raises(DecryptionError):
        store.read_archive(first_id)
    first.write_bytes(first_bytes)
    assert "one" in store.read_archive(first_id)


def test_frame_moved_between_files_fails(workspace: Path, keyring: Keyring) -> None:
    a, b = _store(workspace, keyring, "A"), _store(workspace, keyring, "A2")
    a.append(_block("from a"))
    b.append(_block("from b"))
    a.close(), b.close()
    a_bytes, b_bytes = a.memory_path.read_bytes(), b.memory_path.read_bytes()
    a_last = scan(a_bytes, None).frames[-1]
    b_last = scan(b_bytes, None).frames[-1]
    # Replace B's last frame with A's (same position, other file).
    b.memory_path.write_bytes(b_bytes[: b_last.offset] + a_bytes[a_last.offset :])
    with pytest.raises(DecryptionError, match=r"A2/MEMORY.md.gmenc"):
        _store(workspace, keyring, "A2").read_memory()


def test_file_from_another_workspace_fails(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    k1 = make_keyring(one / "kr")
    k2 = make_keyring(two / "kr")
    _store(one, k1).append(_block("one"))
    _store(two, k2).ensure()
    shutil.copyfile(
        memory_md_path("A", one).parent / "MEMORY.md.gmenc",
        memory_md_path("A", two).parent / "MEMORY.md.gmenc",
    )
    with pytest.raises(DecryptionError):
        _store(two, k2).read_memory()


def test_missing_keyring_is_a_key_error_naming_the_folder(
    workspace: Path, keyring: Keyring
) -> None:
    _store(workspace, keyring).append(_block("one"))
    elsewhere = make_keyring(workspace / "elsewhere")
    with pytest.raises(KeyUnavailableError, match=r"no keyring in .*elsewhere.*KEYRING_DIR"):
        _store(workspace, elsewhere).read_memory()


# -- plaintext next to encrypted --------------------------------------------------


def test_plaintext_memory_is_refused_with_the_migration_command(
    workspace: Path, keyring: Keyring
) -> None:
    PlaintextAgentStore(memory_md_path("A", workspace), _header).append(_block("plain"))
    store = _store(workspace, keyring)
    with pytest.raises(ConfigurationError, match="encrypt-workspace"):
        store.ensure()
    with pytest.raises(ConfigurationError, match="encrypt-workspace"):
        store.read_memory()


def test_rewrite_refuses_foreign_paths(workspace: Path, keyring: Keyring) -> None:
    store = _store(workspace, keyring)
    store.ensure()
    with pytest.raises(StorageError, match="refused"):
        store.rewrite_archive(str(workspace / "elsewhere.gmenc"), "x")
    with pytest.raises(StorageError, match="refused"):
        store.rewrite_archive("history_x.gmenc", "x")
    with pytest.raises(StorageError, match="does not exist"):
        store.rewrite_archive("history_x", "x")


def test_archive_names_never_collide_within_a_second(workspace: Path, keyring: Keyring) -> None:
    clock = FixedClock(dt.datetime(2026, 11, 30, 10))
    store = EncryptedAgentStore(
        memory_md_path("A", workspace), _header, keyring=keyring, clock=clock
    )
    names = []
    for i in range(3):
        store.append(_block(f"m{i}"))
        archive = store.compact(None)
        assert archive is not None
        names.append(store.archive_file(archive).name)
    assert names == [
        "history_2026-11-30_10-00-00.gmenc",
        "history_2026-11-30_10-00-00_000001.gmenc",
        "history_2026-11-30_10-00-00_000002.gmenc",
    ]
    assert [store.read_archive(p).count("### User") for p in store.list_archives()] == [1, 1, 1]


def test_compaction_without_records_writes_no_archive(workspace: Path, keyring: Keyring) -> None:
    store = _store(workspace, keyring)
    store.ensure()
    assert store.compact(_block("summary")) is None
    assert store.read_memory() == _header() + _block("summary")


def test_pinned_randomness_gives_reproducible_files(tmp_path: Path) -> None:
    def build(root: Path) -> bytes:
        keyring = make_keyring(root / "kr", random=SeededRandom(), clock=FixedClock())
        store = EncryptedAgentStore(
            memory_md_path("A", root), _header, keyring=keyring, random=SeededRandom(b"nonces")
        )
        store.append(_block("hello"))
        return store.memory_path.read_bytes()

    assert build(tmp_path / "x") == build(tmp_path / "y")


def test_in_memory_provider_works_end_to_end(workspace: Path) -> None:
    provider = InMemoryKeyProvider()
    store = _store(workspace, Keyring(workspace / "kr", provider))
    store.append(_block("hi"))
    assert _store(
        workspace, Keyring(workspace / "kr", provider)
    ).read_memory() == _header() + _block("hi")


def test_a_subject_memory_under_a_wrong_master_key_is_refused_and_left_as_it_was(
    workspace: Path, keyring: Keyring
) -> None:
    alice = _store(workspace, keyring).subject_store("alice")
    alice.append(_block("alice's secret", "alice"))
    files = {p: p.read_bytes() for p in (workspace / "agents").rglob("*") if p.is_file()}
    wrong = make_keyring(keyring.folder, LocalKeyProvider(bytes(32)))
    with pytest.raises(KeyUnavailableError):  # the folder name itself needs the index key
        _store(workspace, wrong).subject_store("alice")
    (listed,) = _store(workspace, wrong).subject_stores()
    with pytest.raises(KeyUnavailableError, match=r"MEMORY.md.gmenc cannot be read"):
        listed.read_memory()
    with pytest.raises(DecryptionError):
        listed.append(_block("written under the wrong key", "alice"))
    assert {p: p.read_bytes() for p in (workspace / "agents").rglob("*") if p.is_file()} == files
