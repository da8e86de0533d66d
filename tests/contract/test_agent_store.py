"""The AgentStore contract: every backend in conftest.AGENT_STORE_BACKENDS passes it unchanged.

The tests talk to stores only through the protocol (governed_memory._protocols.AgentStore):
no path, no file, no backend type. What they pin is what Conversation, governance,
retention, subjects and the CLI rely on.
"""

from __future__ import annotations

import datetime as dt
import threading
from typing import cast

import pytest
from backends import HEADER, Backend
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governed_memory import StorageError, parse_memory
from governed_memory._format import render_block
from governed_memory._stores import BlockAppender

HOSTILE_IDS = [
    "",
    "../MEMORY",
    "/etc/passwd",
    "history_x/../../../etc/passwd",
    "history_x\x00",
    "archive/history_x",
    "MEMORY.md",
]


def _block(text: str, subject: str | None = None) -> str:
    meta = {"subject_id": subject} if subject is not None else None
    return render_block("Human", "2026-11-30T10:00:00", text, meta)


def _contents(text: str | None) -> list[str]:
    assert text is not None
    return [r.content for r in parse_memory(text).records]


# -- the active memory -------------------------------------------------------------


def test_a_missing_agent_reads_as_nothing(backend: Backend) -> None:
    store = backend.open("A")
    assert store.read_memory() is None
    assert store.list_archives() == []
    assert store.stat() is None
    assert store.read_memory() is None  # reading created nothing
    assert store.agent == "A"


def test_ensure_creates_the_header_once(backend: Backend) -> None:
    store = backend.open("A")
    store.ensure()
    assert store.read_memory() == HEADER
    store.append(_block("one"))
    store.ensure()
    assert store.read_memory() == HEADER + _block("one")


def test_append_creates_the_memory_and_keeps_the_text_exactly(backend: Backend) -> None:
    store = backend.open("A")
    blocks = [
        _block("plain ascii"),
        _block("em dash — and ünïcödé, emoji 🙂, CJK 記憶"),
        _block("line one\nline two\n\n### not a header"),
        _block("a subject's words", subject="S-1"),
    ]
    for block in blocks:
        store.append(block)
    assert store.read_memory() == HEADER + "".join(blocks)
    info = store.stat()
    assert info is not None and info.size > 0


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(texts=st.lists(st.text(min_size=1, max_size=200), min_size=1, max_size=4))
def test_any_text_reads_back_as_it_was_given(backend: Backend, texts: list[str]) -> None:
    agent = f"H{abs(hash(tuple(texts))) % 10**9}"
    store = backend.open(agent)
    store.delete()  # a rerun of the example starts from nothing
    for text in texts:
        store.append(text)
    assert store.read_memory() == HEADER + "".join(texts)
    archive = store.compact("fresh")
    if archive is not None:
        assert store.read_archive(archive) == HEADER + "".join(texts)
    assert store.read_memory() == HEADER + "fresh"
    store.close()


def test_utf8_blocks_equal_text_blocks_when_offered(backend: Backend) -> None:
    store = backend.open("A")
    if not type(store).accepts_utf8_blocks:  # the text path is its only one
        store.append(_block("one"))
        assert store.read_memory() == HEADER + _block("one")
        return
    cast("BlockAppender", store).append_utf8(_block("bytes — one").encode("utf-8"))
    store.append(_block("text — two"))
    assert store.read_memory() == HEADER + _block("bytes — one") + _block("text — two")


# -- compaction and archives ---------------------------------------------------------


def test_compact_archives_the_memory_then_starts_a_fresh_one(backend: Backend) -> None:
    store = backend.open("A")
    store.append(_block("one"))
    store.append(_block("two"))
    before = store.read_memory()
    archive = store.compact(_block("summary"))
    assert isinstance(archive, str)
    assert store.list_archives() == [archive]
    assert store.read_archive(archive) == before
    assert store.read_memory() == HEADER + _block("summary")
    info = store.stat(archive)
    assert info is not None and info.size > 0


def test_compact_without_a_message_writes_no_archive(backend: Backend) -> None:
    store = backend.open("A")
    assert store.compact(None) is None  # no memory at all
    store.ensure()
    assert store.compact(_block("summary")) is None  # a header only
    assert store.list_archives() == []
    assert store.read_memory() == HEADER + _block("summary")


def test_archive_ids_are_unique_and_sorted_oldest_first_within_one_second(
    backend: Backend,
) -> None:
    store = backend.open("A")
    ids = []
    for n in range(4):
        store.append(_block(f"m{n}"))
        archive = store.compact(None)
        assert archive is not None
        ids.append(archive)
    assert len(set(ids)) == 4
    assert store.list_archives() == ids
    assert [_contents(store.read_archive(a)) for a in ids] == [[f"m{n}"] for n in range(4)]


def test_archive_ids_follow_the_clock(backend: Backend) -> None:
    store = backend.open("A")
    store.append(_block("early"))
    first = store.compact(None)
    backend.clock.advance(dt.timedelta(days=1))
    store.append(_block("late"))
    second = store.compact(None)
    assert first is not None and second is not None
    assert store.list_archives() == [first, second]


def test_an_unknown_archive_id_is_refused(backend: Backend) -> None:
    store = backend.open("A")
    store.append(_block("one"))
    store.compact(None)
    with pytest.raises(StorageError):
        store.read_archive("history_1999-01-01_00-00-00")
    with pytest.raises(StorageError):
        store.rewrite_archive("history_1999-01-01_00-00-00", "x")
    assert store.stat("history_1999-01-01_00-00-00") is None


@pytest.mark.parametrize("hostile", HOSTILE_IDS)
def test_an_id_that_is_not_an_archive_is_refused_and_nothing_changes(
    backend: Backend, hostile: str
) -> None:
    store = backend.open("A")
    store.append(_block("one"))
    archive = store.compact(_block("summary"))
    assert archive is not None
    memory, archived = store.read_memory(), store.read_archive(archive)
    with pytest.raises(StorageError):
        store.read_archive(hostile)
    with pytest.raises(StorageError):
        store.rewrite_archive(hostile, "overwritten")
    assert store.read_memory() == memory
    assert store.read_archive(archive) == archived
    assert store.list_archives() == [archive]


# -- rewriting (erasure, rectification) ----------------------------------------------


def test_rewrite_replaces_one_text_and_leaves_the_others(backend: Backend) -> None:
    store = backend.open("A")
    store.append(_block("first"))
    one = store.compact(None)
    store.append(_block("second"))
    two = store.compact(_block("summary"))
    assert one is not None and two is not None
    kept = store.read_archive(two)
    with store.lock():
        store.rewrite_archive(one, HEADER)
        store.rewrite_memory(HEADER + _block("rectified"))
    assert store.read_archive(one) == HEADER
    assert store.read_archive(two) == kept
    assert store.read_memory() == HEADER + _block("rectified")
    store.append(_block("after"))  # appends go to the rewritten memory
    assert _contents(store.read_memory()) == ["rectified", "after"]


def test_rewriting_a_missing_memory_is_refused(backend: Backend) -> None:
    store = backend.open("A")
    with pytest.raises(StorageError):
        store.rewrite_memory(HEADER)
    assert store.read_memory() is None


# -- where things are, for reports ----------------------------------------------------


def test_sources_are_distinct_and_stable(backend: Backend) -> None:
    store = backend.open("A")
    store.append(_block("one"))
    one = store.compact(None)
    store.append(_block("two"))
    two = store.compact(None)
    assert one is not None and two is not None
    sources = [store.source(), store.source(one), store.source(two)]
    assert len(set(sources)) == 3 and all(isinstance(s, str) and s for s in sources)
    again = backend.open("A")
    assert [again.source(), again.source(one), again.source(two)] == sources


# -- deletion ----------------------------------------------------------------------


def test_delete_removes_the_agent_and_a_later_append_starts_afresh(backend: Backend) -> None:
    store = backend.open("A")
    other = backend.open("B")
    other.append(_block("b's"))
    store.append(_block("one"))
    store.compact(None)
    with store.lock():
        store.delete()
    assert store.read_memory() is None
    assert store.list_archives() == []
    store.append(_block("new"))
    assert store.read_memory() == HEADER + _block("new")
    assert _contents(other.read_memory()) == ["b's"]  # another agent is untouched
    store.delete()
    store.delete()  # deleting nothing is not an error


# -- sharing, locking, concurrency ------------------------------------------------------


def test_stores_on_one_agent_share_it_and_agents_are_separate(backend: Backend) -> None:
    first, second, other = backend.open("A"), backend.open("A"), backend.open("B")
    first.append(_block("from first"))
    second.append(_block("from second"))
    assert _contents(first.read_memory()) == ["from first", "from second"]
    archive = second.compact(None)
    assert archive is not None
    assert first.list_archives() == [archive]
    first.append(_block("after the other's compaction"))
    assert _contents(second.read_memory()) == ["after the other's compaction"]
    assert other.read_memory() is None and other.list_archives() == []


def test_a_closed_store_reopens_on_use(backend: Backend) -> None:
    store = backend.open("A")
    store.append(_block("one"))
    store.close()
    store.append(_block("two"))
    assert _contents(store.read_memory()) == ["one", "two"]
    store.close()
    assert _contents(backend.open("A").read_memory()) == ["one", "two"]


def test_the_lock_is_reentrant_for_the_stores_own_methods(backend: Backend) -> None:
    store = backend.open("A")
    store.append(_block("one"))
    with store.lock(), store.lock():
        text = store.read_memory()
        assert text is not None
        store.list_archives()
        store.rewrite_memory(text + _block("two"))
        store.append(_block("three"))
    assert _contents(store.read_memory()) == ["one", "two", "three"]


def test_the_lock_excludes_another_store_of_the_agent(backend: Backend) -> None:
    holder, waiter = backend.open("A"), backend.open("A")
    holder.append(_block("one"))
    entered = threading.Event()
    done = threading.Event()

    def append() -> None:
        entered.set()
        waiter.append(_block("waited"))
        done.set()

    with holder.lock():
        thread = threading.Thread(target=append)
        thread.start()
        entered.wait(5)
        assert not done.wait(0.2)  # blocked while the lock is held
        text = holder.read_memory()
        assert text is not None
        holder.rewrite_memory(text + _block("under the lock"))
    thread.join(10)
    assert _contents(holder.read_memory()) == ["one", "under the lock", "waited"]


def test_no_block_is_lost_to_concurrent_appends_and_compactions(backend: Backend) -> None:
    writers, per_writer = 4, 25
    errors: list[BaseException] = []

    def write(n: int) -> None:
        store = backend.open("A")
        try:
            for i in range(per_writer):
                store.append(_block(f"w{n}-{i}"))
                if n == 0 and i % 5 == 4:
                    store.compact(None)
        except BaseException as exc:  # reported below, with the thread's cause
            errors.append(exc)
        finally:
            store.close()

    threads = [threading.Thread(target=write, args=(n,)) for n in range(writers)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert errors == []
    store = backend.open("A")
    seen = [c for a in store.list_archives() for c in _contents(store.read_archive(a))]
    seen += _contents(store.read_memory())
    expected = {f"w{n}-{i}" for n in range(writers) for i in range(per_writer)}
    assert sorted(seen) == sorted(expected)  # each block exactly once
