"""The purge executor's Journal over PgPurgeJournal: a plan in the database, read back and resumed."""

from __future__ import annotations

import pytest

from governed_memory import DatabaseError
from governed_memory._base import ArtefactKind
from governed_memory._errors import FormatVersionError, JournalError
from governed_memory._postgres import SCHEMA, Database, PgPurgeJournal
from governed_memory._postgres._journal import PAGE
from governed_memory._retention._journal import JOURNAL_FORMAT_VERSION, Journal, write_journal
from governed_memory._retention._plan import Rule


def _entries(count: int) -> list[list[object]]:
    return [
        [n, "archive", f"agents/a/archive/history_{n}.md", "archives_max_age", n, "a", n, 7]
        for n in range(count)
    ]


def _plan(storage: PgPurgeJournal, count: int) -> None:
    header = {"v": JOURNAL_FORMAT_VERSION, "id": "purge-1"}
    assert storage.write_plan(header, iter(_entries(count)), lambda: {"end": count})


def test_the_executor_reads_a_plan_kept_in_the_database(pg_db: Database) -> None:
    storage = PgPurgeJournal(pg_db)
    _plan(storage, PAGE + 5)  # more than one page of entries
    journal = Journal.find(None, storage=PgPurgeJournal(pg_db))
    assert journal is not None
    assert journal.header["id"] == "purge-1" and journal.total == PAGE + 5
    entries = list(journal.entries())
    assert [e.n for e in entries] == list(range(PAGE + 5))
    assert entries[3].kind is ArtefactKind.ARCHIVE and entries[3].rule is Rule.ARCHIVES_MAX_AGE
    assert entries[3].path == "agents/a/archive/history_3.md" and entries[3].ident == (3, 7)


def test_progress_recorded_by_one_process_is_resumed_by_another(pg_db: Database) -> None:
    _plan(PgPurgeJournal(pg_db), 4)
    first = Journal(None, storage=PgPurgeJournal(pg_db))
    first.record(b"dg")
    resumed = Journal(None, storage=PgPurgeJournal(pg_db))
    assert resumed.outcomes() == b"dg"
    resumed.remove()
    assert Journal.find(None, storage=PgPurgeJournal(pg_db)) is None


def test_journals_of_different_names_are_apart(pg_db: Database) -> None:
    _plan(PgPurgeJournal(pg_db, "one"), 2)
    assert not PgPurgeJournal(pg_db, "two").pending()
    PgPurgeJournal(pg_db, "two").remove()
    assert PgPurgeJournal(pg_db, "one").pending()


def test_write_journal_writes_to_the_storage_given(pg_db: Database) -> None:
    storage = PgPurgeJournal(pg_db)
    footer = write_journal(None, {"id": "purge-9"}, iter(()), storage=storage)
    assert footer["end"] == 0 and not storage.pending()  # nothing to delete, nothing written


def test_a_plan_of_another_format_version_names_it(pg_db: Database) -> None:
    storage = PgPurgeJournal(pg_db)
    storage.write_plan({"v": 99, "id": "x"}, iter(_entries(1)), lambda: {"end": 1})
    with pytest.raises(FormatVersionError, match="99"):
        Journal(None, storage=storage)


def test_a_damaged_entry_is_a_journal_error(pg_db: Database) -> None:
    storage = PgPurgeJournal(pg_db)
    _plan(storage, 3)
    with pg_db.transaction() as conn:
        conn.execute(f"UPDATE {SCHEMA}.purge_entries SET entry = '[1, ' WHERE n = 1")
    with pytest.raises(JournalError, match="damaged"):
        list(Journal(None, storage=storage).entries())


def test_a_database_journal_has_no_progress_file(pg_db: Database) -> None:
    storage = PgPurgeJournal(pg_db)
    _plan(storage, 1)
    with pytest.raises(JournalError, match=r"Journal\.record"):
        Journal(None, storage=storage).open_progress()


def test_an_unreachable_server_is_one_retryable_line() -> None:
    storage = PgPurgeJournal(Database(_bad_url(), connect_timeout=1))
    with pytest.raises(DatabaseError) as caught:
        storage.pending()
    assert caught.value.retryable and "\n" not in str(caught.value)


def _bad_url() -> str:
    return "postgresql://nobody@127.0.0.1:1/none?connect_timeout=1"
