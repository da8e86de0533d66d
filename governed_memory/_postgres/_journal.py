"""A purge's journal in PostgreSQL: :class:`PgPurgeJournal`, a :class:`PurgeJournal`.

The plan is one row of ``governed_memory.purge_plans`` (header and footer, as JSON
text) and its entries are rows of ``purge_entries`` (one JSON array each, numbered
from 0), all inserted in one transaction with ``COPY``: the plan exists complete or
not at all, and a failed write leaves the previous plan as it was. Outcomes are
appended as rows of ``purge_outcomes`` (one per :meth:`PgPurgeJournal.record`, each
committed before the call returns), so recording never rewrites what is there.
Entries are read back in pages of :data:`PAGE` rows, each page its own short
transaction: a purge of millions of rows holds neither memory nor a transaction open.

The caller holds the purge's :class:`~governed_memory._protocols.Leadership` lock:
a journal has one writer.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from .._errors import JournalError
from ._keyring import run
from ._schema import SCHEMA

if TYPE_CHECKING:
    import psycopg

    from .._protocols import PurgeJournal
    from ._db import Database

__all__ = ["PAGE", "PgPurgeJournal"]

PAGE = 2000
"""Entries read per round trip by :meth:`PgPurgeJournal.read_entries`."""

_ENCODE = json.JSONEncoder(ensure_ascii=False, separators=(",", ":")).encode


class PgPurgeJournal:
    """The purge journal called ``name`` in the database ``db`` (one per workspace or deployment)."""

    def __init__(self, db: Database, name: str = "purge") -> None:
        self.db = db
        self.name = name

    def _where(self) -> str:
        return f"purge journal {self.name!r} in {self.db.where}"

    def write_plan(
        self,
        header: Mapping[str, Any],
        entries: Iterable[Sequence[Any]],
        footer: Callable[[], Mapping[str, Any]],
    ) -> bool:
        items = iter(entries)
        first = next(items, None)  # before any transaction: no entry, nothing written
        if first is None:
            return False

        def write(conn: psycopg.Connection[Any]) -> None:
            self._delete(conn)
            count = 0
            with conn.cursor().copy(
                f"COPY {SCHEMA}.purge_entries (name, n, entry) FROM STDIN"
            ) as copy:
                for entry in _chain(first, items):
                    copy.write_row((self.name, count, _ENCODE(list(entry))))
                    count += 1
            conn.execute(
                f"INSERT INTO {SCHEMA}.purge_plans (name, header, footer, total) "
                "VALUES (%s, %s, %s, %s)",
                (self.name, json.dumps(dict(header)), json.dumps(dict(footer())), count),
            )

        run(self.db, "writing the purge journal", write)
        return True

    def _delete(self, conn: psycopg.Connection[Any]) -> None:
        conn.execute(f"DELETE FROM {SCHEMA}.purge_plans WHERE name = %s", (self.name,))
        conn.execute(f"DELETE FROM {SCHEMA}.purge_outcomes WHERE name = %s", (self.name,))

    def pending(self) -> bool:
        row = run(
            self.db,
            "reading the purge journal",
            lambda conn: conn.execute(
                f"SELECT 1 FROM {SCHEMA}.purge_plans WHERE name = %s", (self.name,)
            ).fetchone(),
        )
        return row is not None

    def _plan(self) -> tuple[Any, Any]:
        row = run(
            self.db,
            "reading the purge journal",
            lambda conn: conn.execute(
                f"SELECT header, footer FROM {SCHEMA}.purge_plans WHERE name = %s", (self.name,)
            ).fetchone(),
        )
        if row is None:
            raise FileNotFoundError(f"there is no {self._where()}")
        try:
            return json.loads(row[0]), json.loads(row[1])
        except ValueError as exc:
            raise JournalError(f"{self._where()} is damaged ({exc})") from exc

    def read_header(self) -> dict[str, Any]:
        header = self._plan()[0]
        if not isinstance(header, dict):
            raise JournalError(f"{self._where()} has no header; it is damaged")
        return header

    def read_footer(self) -> dict[str, Any]:
        footer = self._plan()[1]
        if not isinstance(footer, dict) or not isinstance(footer.get("end"), int):
            raise JournalError(f"{self._where()} has no footer; it is damaged")
        return footer

    def read_entries(self) -> Iterator[list[Any]]:
        total = int(self.read_footer()["end"])
        position = 0
        while position < total:
            rows = self._page(position, total)
            if not rows:
                raise JournalError(
                    f"{self._where()} lacks entry {position} of {total}; it is damaged: "
                    "remove the journal to discard the interrupted purge"
                )
            for n, text in rows:
                if n != position:
                    raise JournalError(f"{self._where()} lacks entry {position}; it is damaged")
                try:
                    entry = json.loads(text)
                except ValueError as exc:
                    raise JournalError(
                        f"{self._where()} entry {n} is damaged ({exc}); "
                        "remove the journal to discard the interrupted purge"
                    ) from exc
                if not isinstance(entry, list):
                    raise JournalError(f"{self._where()} entry {n} is damaged")
                yield entry
                position += 1

    def _page(self, start: int, total: int) -> list[tuple[int, str]]:
        rows: list[tuple[int, str]] = run(
            self.db,
            "reading the purge journal",
            lambda conn: conn.execute(
                f"SELECT n, entry FROM {SCHEMA}.purge_entries "
                "WHERE name = %s AND n >= %s AND n < %s ORDER BY n LIMIT %s",
                (self.name, start, total, PAGE),
            ).fetchall(),
        )
        return rows

    def record(self, outcomes: bytes) -> None:
        if not outcomes:
            return
        run(
            self.db,
            "recording the purge's progress",
            lambda conn: conn.execute(
                f"INSERT INTO {SCHEMA}.purge_outcomes (name, outcomes) VALUES (%s, %s)",
                (self.name, outcomes),
            ),
        )

    def outcomes(self) -> bytes:
        rows = run(
            self.db,
            "reading the purge's progress",
            lambda conn: conn.execute(
                f"SELECT outcomes FROM {SCHEMA}.purge_outcomes WHERE name = %s ORDER BY seq",
                (self.name,),
            ).fetchall(),
        )
        return b"".join(bytes(row[0]) for row in rows)

    def remove(self) -> None:
        run(self.db, "removing the purge journal", self._delete)  # plan and progress at once

    def __repr__(self) -> str:
        return f"PgPurgeJournal({self.db.where!r}, name={self.name!r})"


def _chain(first: Sequence[Any], rest: Iterator[Sequence[Any]]) -> Iterator[Sequence[Any]]:
    yield first
    yield from rest


if TYPE_CHECKING:
    _conforms: type[PurgeJournal] = PgPurgeJournal
