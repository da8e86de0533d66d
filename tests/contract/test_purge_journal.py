"""Contract of the purge journal seam (PurgeJournal), run over every implementation.

A backend joins by appending a ``pytest.param`` to ``JOURNALS``: a factory
that opens the journal ``tmp_path`` names (called again, it opens the same
journal, as the purge resumed by another process would).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pg_keys import JOURNALS as PG_JOURNALS

from governed_memory._protocols import PurgeJournal
from governed_memory._retention._journal import Journal, JournalFolder

Opener = Callable[[], PurgeJournal]

HEADER = {"v": 1, "id": "purge-1", "policy": "test"}


def _file_journal(tmp_path: Path) -> Opener:
    return lambda: JournalFolder(tmp_path / "purge")


JOURNALS = [pytest.param(_file_journal, id="file")]
JOURNALS += PG_JOURNALS


@pytest.fixture(params=JOURNALS)
def open_journal(request: pytest.FixtureRequest, tmp_path: Path) -> Opener:
    opener: Opener = request.param(tmp_path)
    return opener


def _entries(count: int) -> list[list[Any]]:
    return [
        [n, "archive", f"agents/a/archive/history_{n}.md", "archives_max_age", 10 * n, "a", n, n]
        for n in range(count)
    ]


def _write(journal: PurgeJournal, entries: list[list[Any]]) -> bool:
    return journal.write_plan(HEADER, iter(entries), lambda: {"end": len(entries)})


def test_a_new_journal_has_no_plan(open_journal: Opener) -> None:
    journal = open_journal()
    assert not journal.pending()
    assert journal.outcomes() == b""


def test_a_plan_without_entries_is_not_written(open_journal: Opener) -> None:
    journal = open_journal()
    assert not _write(journal, [])
    assert not journal.pending()


def test_the_plan_reads_back_as_written(open_journal: Opener) -> None:
    entries = _entries(5)
    assert _write(open_journal(), entries)
    journal = open_journal()
    assert journal.pending()
    assert journal.read_header() == HEADER
    assert journal.read_footer() == {"end": 5}
    assert list(journal.read_entries()) == entries


def test_the_footer_is_built_after_the_entries_were_consumed(open_journal: Opener) -> None:
    seen: list[int] = []

    def entries() -> Iterator[list[Any]]:
        for entry in _entries(3):
            seen.append(entry[0])
            yield entry

    journal = open_journal()
    assert journal.write_plan(HEADER, entries(), lambda: {"end": len(seen)})
    assert journal.read_footer() == {"end": 3}


def test_outcomes_are_recorded_in_order(open_journal: Opener) -> None:
    _write(open_journal(), _entries(4))
    journal = open_journal()
    journal.record(b"d")
    journal.record(b"gc")
    assert open_journal().outcomes() == b"dgc"


def test_remove_forgets_the_plan_and_its_progress(open_journal: Opener) -> None:
    journal = open_journal()
    _write(journal, _entries(2))
    journal.record(b"dd")
    journal.remove()
    other = open_journal()
    assert not other.pending()
    assert other.outcomes() == b""


def test_a_failed_write_leaves_the_previous_plan(open_journal: Opener) -> None:
    journal = open_journal()
    _write(journal, _entries(2))

    def failing() -> Iterator[list[Any]]:
        yield from _entries(1)
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        journal.write_plan({"v": 1, "id": "purge-2"}, failing(), lambda: {"end": 1})
    again = open_journal()
    assert again.read_header() == HEADER
    assert list(again.read_entries()) == _entries(2)


def test_a_failed_first_write_leaves_no_plan(open_journal: Opener) -> None:
    def failing() -> Iterator[list[Any]]:
        yield from _entries(1)
        raise OSError("disk full")

    with pytest.raises(OSError):
        open_journal().write_plan(HEADER, failing(), lambda: {"end": 1})
    assert not open_journal().pending()


def test_the_file_journal_is_what_the_executor_reads(tmp_path: Path) -> None:
    """The file backend writes the journal format :class:`Journal` opens and resumes."""
    folder = tmp_path / "purge"
    entries = _entries(3)
    JournalFolder(folder).write_plan(HEADER, iter(entries), lambda: {"end": 3})
    JournalFolder(folder).record(b"d")
    journal = Journal(folder)
    assert journal.header["id"] == "purge-1"
    assert journal.total == 3
    assert journal.outcomes() == b"d"
    assert [(e.n, e.path, e.size) for e in journal.entries()] == [
        (e[0], e[2], e[4]) for e in entries
    ]
