"""The PostgreSQL ``MemoryBackend``: the agents that have memory in the database, and their stores.

Export, erasure and inspection find agents through it, as they find the folders of
``agents/`` through ``FileMemoryBackend``: an agent is listed once it has a memory
(its own or a subject's) or an archive, and no longer once deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._base import AGENTS_DIR, MEMORY_FILE, validate_agent_name
from .._protocols import AgentStore, StoreFactory
from ._db import _import_psycopg
from ._memory_locks import memory_error

if TYPE_CHECKING:
    import psycopg

    from ._db import Database

__all__ = ["PgMemoryBackend"]

_T = "governed_memory"


class PgMemoryBackend:
    """The agents kept in ``db``, each opened by ``store_factory`` (a :class:`PgStores`).

    ``store_factory`` gets ``agents/<name>/MEMORY.md`` as the path, a name only:
    nothing is kept there.
    """

    def __init__(self, db: Database, store_factory: StoreFactory) -> None:
        self.db = db
        self.factory = store_factory

    @contextmanager
    def _tx(self, doing: str) -> Iterator[psycopg.Connection[Any]]:
        psycopg, _ = _import_psycopg()
        try:
            with self.db.transaction(doing) as conn:
                yield conn
        except psycopg.Error as exc:
            raise memory_error(self.db, exc, doing) from None

    def agents(self) -> list[str]:
        with self._tx("listing the agents") as conn:
            rows = conn.execute(
                f"SELECT agent FROM {_T}.memories UNION SELECT agent FROM {_T}.memory_archives"
            ).fetchall()
        return sorted(row[0] for row in rows)

    def has_agent(self, agent: str) -> bool:
        name = validate_agent_name(agent)
        with self._tx("looking up an agent") as conn:
            row = conn.execute(
                f"SELECT EXISTS (SELECT 1 FROM {_T}.memories WHERE agent = %(a)s)"
                f" OR EXISTS (SELECT 1 FROM {_T}.memory_archives WHERE agent = %(a)s)",
                {"a": name},
            ).fetchone()
        return bool(row and row[0])

    def open(self, agent: str, header: Callable[[], str]) -> AgentStore:
        return self.factory(Path(AGENTS_DIR, validate_agent_name(agent), MEMORY_FILE), header)

    def __repr__(self) -> str:
        return f"PgMemoryBackend({self.db.where!r})"


if TYPE_CHECKING:  # mypy checks that the class implements the storage seam's protocol
    from .._protocols import MemoryBackend

    _conforms: type[MemoryBackend] = PgMemoryBackend
