"""The PostgreSQL deployment storage: every persistent part of a Governance in one database.

:func:`open_storage` is what a Governance opens when the settings select the
database (``GOVERNED_MEMORY_DATABASE_URL``, or ``[storage] backend = "postgres"``
with libpq's ``PG*`` variables). Every host with the same URL, policy and keys
opens the same deployment: the agents' memory (:mod:`._memory`), the registries
(:mod:`._records`), the keyring's wrapped keys (:mod:`._keyring`), the one audit
chain (:mod:`._audit`), the purge journal (:mod:`._journal`) and the single
leaders (:mod:`._leader`) are all rows of the ``governed_memory`` schema, and
nothing of them is kept on the host's disk.

Opening connects nothing. The first statement of the deployment connects once
directly (so libpq's own message names a wrong host or password) and checks the
schema version there: a database without the schema, or with another release's,
is refused naming both versions and ``governed-memory db upgrade``.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._db import Database
from ._schema import verify_connection

if TYPE_CHECKING:
    from .._policy import Settings
    from .._protocols import AgentStore, DeploymentStorage, MemoryBackend, StoreFactory
    from ._audit import PgAuditStorage
    from ._journal import PgPurgeJournal
    from ._keyring import PgKeyStorage
    from ._leader import PgLeadership
    from ._memory_backend import PgStores
    from ._records import PgPlace

__all__ = ["PostgresStorage", "open_storage"]


class PostgresStorage:
    """The database backend of :class:`~governed_memory._protocols.DeploymentStorage`.

    Args:
        db: the deployment's database (its pool is shared by every part).

    Safe to share between threads: the parts it opens are cached (one record
    place, one keyring storage, one set of agent stores per mode), as the file
    backend's parts share their folders.
    """

    kind = "postgres"

    def __init__(self, db: Database) -> None:
        self.db = db
        self._mutex = threading.Lock()
        self._place: PgPlace | None = None
        self._keys: PgKeyStorage | None = None
        self._stores: dict[tuple[bool, int, int], PgStores] = {}

    @property
    def where(self) -> str:
        return f"PostgreSQL at {self.db.where}"

    @property
    def files(self) -> Path | None:
        return None

    def agent_store(
        self,
        memory_path: Path,
        header: Callable[[], str],
        *,
        encrypted: bool,
        keyring: Callable[[], Any],
        clock: Any,
        durable: bool,
        syncer: Any,
    ) -> AgentStore:
        # Every append commits before it returns: ``durable`` is what the database does anyway.
        del durable, syncer
        return self._agent_stores(encrypted, keyring, clock)(Path(memory_path), header)

    def _agent_stores(self, encrypted: bool, keyring: Callable[[], Any], clock: Any) -> PgStores:
        """One set of stores per mode, keyring and clock: stores of one set share lock sessions."""
        from ._memory_backend import pg_store_factory

        key = (encrypted, id(keyring) if encrypted else 0, id(clock))
        with self._mutex:
            stores = self._stores.get(key)
            if stores is None:
                stores = pg_store_factory(
                    self.db, keyring=keyring if encrypted else None, clock=clock
                )
                self._stores[key] = stores
            return stores

    def memory_backend(self, store_factory: StoreFactory) -> MemoryBackend:
        from ._memory_backend import PgMemoryBackend

        return PgMemoryBackend(self.db, store_factory)

    def records(self) -> PgPlace:
        with self._mutex:
            if self._place is None:
                from ._records import PgPlace

                self._place = PgPlace(self.db)
            return self._place

    def key_storage(self) -> PgKeyStorage:
        with self._mutex:
            if self._keys is None:
                from ._keyring import PgKeyStorage

                self._keys = PgKeyStorage(self.db)
            return self._keys

    def audit_storage(
        self,
        log_dir: str | None,
        key: Any,
        *,
        previous_keys: Iterable[Any],
        clock: Any,
        syncer: Any = None,
    ) -> PgAuditStorage:
        # One chain for the deployment: audit.log_dir names a folder of the file backend.
        del log_dir, syncer
        from ._audit import PgAuditStorage

        return PgAuditStorage(self.db, key, previous_keys=previous_keys, clock=clock)

    def leadership(self, name: str) -> PgLeadership:
        from ._leader import PgLeadership

        return PgLeadership(self.db, name)

    def purge_journal(self, name: str) -> PgPurgeJournal:
        from ._journal import PgPurgeJournal

        return PgPurgeJournal(self.db, name)

    def close(self) -> None:
        self.db.close()

    def __repr__(self) -> str:
        return f"PostgresStorage({self.db.where!r})"


def open_storage(url: str, *, settings: Settings) -> DeploymentStorage:
    """The deployment's storage in the database at ``url`` ("": libpq's ``PG*`` variables).

    Connects nothing; the first use checks the schema version (see the module docstring).
    """
    del settings  # the pool's sizes are the defaults; nothing else is read from them yet
    return PostgresStorage(Database(url, verify=verify_connection))


if TYPE_CHECKING:
    _AS_STORAGE: DeploymentStorage = PostgresStorage(Database(""))
