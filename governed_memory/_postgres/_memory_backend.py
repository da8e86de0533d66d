"""The agents of a PostgreSQL database: the factory of their stores, and the ``MemoryBackend``.

:class:`PgStores` is the ``StoreFactory`` (``pg_store_factory`` builds it): it opens
:class:`~._memory.PgAgentStore`s, sharing one set of lock sessions. :class:`PgMemoryBackend`
is how export, erasure and inspection find agents, as they find the folders of
``agents/`` through ``FileMemoryBackend``: an agent is listed once it has a memory
(its own or a subject's) or an archive, and no longer once deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._base import AGENTS_DIR, MEMORY_FILE, Clock, SystemClock, validate_agent_name
from .._protocols import AgentStore, StoreFactory
from ._db import _import_psycopg
from ._memory import PgAgentStore
from ._memory_locks import LockSessions, memory_error

if TYPE_CHECKING:
    import psycopg

    from .._crypto import Keyring
    from ._db import Database

__all__ = ["PgMemoryBackend", "PgStores", "pg_store_factory"]

_T = "governed_memory"


class PgStores:
    """The agent stores of one database: a ``StoreFactory`` (call it with a MEMORY.md path).

    Args:
        db: the database.
        keyring: returns the keyring when the memory is encrypted; None for plaintext.
        clock: names archives.

    The stores it opens share its lock sessions (``_memory_locks``): a thread holding
    one store's :meth:`~PgAgentStore.lock` uses the same connection for all of them.
    """

    def __init__(
        self,
        db: Database,
        *,
        keyring: Callable[[], Keyring] | None = None,
        clock: Clock | None = None,
    ) -> None:
        self.db = db
        self.keyring = keyring
        self.clock: Clock = clock or SystemClock()
        self.sessions = LockSessions.of(db)

    def open(self, agent: str, header: Callable[[], str]) -> PgAgentStore:
        """The store of ``agent``'s own memory (creates nothing)."""
        return PgAgentStore(self, validate_agent_name(agent), header)

    def __call__(self, memory_path: Path, header: Callable[[], str]) -> PgAgentStore:
        """The store of the agent whose ``memory_md_path`` is ``memory_path`` (its folder's name)."""
        return self.open(Path(memory_path).parent.name, header)

    def __repr__(self) -> str:
        mode = "plaintext" if self.keyring is None else "encrypted"
        return f"PgStores({self.db.where!r}, {mode})"


def pg_store_factory(
    db: Database, *, keyring: Callable[[], Keyring] | None, clock: Clock
) -> PgStores:
    """A ``StoreFactory`` whose stores keep memory in ``db`` (``keyring`` None: plaintext)."""
    return PgStores(db, keyring=keyring, clock=clock)


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
