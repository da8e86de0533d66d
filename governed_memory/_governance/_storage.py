"""Which storage a deployment runs on: the file backend, and the choice made from settings and policy.

:class:`FileStorage` is today's layout, bytes unchanged: agents under
``<workspace>/agents/``, the registries, keyring, audit log, purge journal and
scheduler files under ``<workspace>/.governed_memory/``. :func:`open_storage`
picks the backend a Governance owns:

* ``[storage] backend = "postgres"`` in the policy, or a database URL
  (``GOVERNED_MEMORY_DATABASE_URL``) with no ``[storage]`` table: PostgreSQL,
  at that URL (none: libpq's ``PG*`` variables name the server);
* otherwise the files of the workspace.

``backend = "files"`` together with a URL is refused: one of the two is a
mistake, and guessing would write personal data to the wrong place.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._base import GOVERNANCE_DIR, LeaderLock, resolve_workspace
from .._errors import ConfigurationError
from .._policy import Policy, Settings
from .._protocols import AgentStore, MemoryBackend, StoreFactory
from .._stores import FileMemoryBackend

if TYPE_CHECKING:
    from .._audit import AuditLog
    from .._protocols import DeploymentStorage

__all__ = [
    "PURGE_DIR",
    "SCHEDULER_DIR",
    "FileStorage",
    "file_workspace",
    "open_storage",
    "storage_backend",
    "storage_for",
]

KEYRING_DIR = "keyring"
PURGE_DIR = "purge"
SCHEDULER_DIR = "scheduler"
LEADER_LOCK = "leader.lock"


class FileStorage:
    """The file backend of :class:`~governed_memory._protocols.DeploymentStorage`: one workspace folder.

    Args:
        workspace: the folder everything is kept in.
        keyring_dir: the keyring's folder when not the workspace's
            (``GOVERNED_MEMORY_KEYRING_DIR``).

    Opening it writes nothing; each part creates its files on first write.
    Not safe across hosts: ``flock`` and ``inotify`` do not hold over NFS or SMB.
    """

    kind = "files"

    def __init__(self, workspace: str | Path, *, keyring_dir: str | Path | None = None) -> None:
        self.workspace = Path(workspace)
        self.keyring_dir = Path(keyring_dir) if keyring_dir is not None else None

    @property
    def where(self) -> str:
        return str(self.workspace)

    @property
    def files(self) -> Path:
        return self.workspace

    @property
    def governance_dir(self) -> Path:
        """``<workspace>/.governed_memory``."""
        return self.workspace / GOVERNANCE_DIR

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
        from ._encryption import policy_store

        return policy_store(
            self.memory_path(memory_path),
            header,
            encrypted=encrypted,
            keyring=keyring,
            clock=clock,
            durable=durable,
            syncer=syncer,
        )

    def memory_path(self, memory_path: Path) -> Path:
        """Where the agent named by ``memory_path`` keeps its MEMORY.md: there, in this backend."""
        return Path(memory_path)

    def memory_backend(self, store_factory: StoreFactory) -> MemoryBackend:
        return FileMemoryBackend(self.workspace, store_factory)

    def records(self) -> Path:
        return self.governance_dir

    def key_storage(self) -> Path:
        return self.keyring_dir or self.governance_dir / KEYRING_DIR

    def audit_storage(
        self,
        log_dir: str | None,
        key: Any,
        *,
        previous_keys: Iterable[Any],
        clock: Any,
        syncer: Any = None,
    ) -> AuditLog:
        from .._audit import AuditLog

        return AuditLog(
            self.audit_dir(log_dir),
            key,
            clock=clock,
            previous_keys=previous_keys,
            workspace=self.workspace,
            syncer=syncer,
        )

    def audit_dir(self, log_dir: str | None) -> Path:
        """The audit log's folder: ``log_dir`` (relative to the workspace), else ``.governed_memory/audit``."""
        from .._base import AUDIT_DIR

        if log_dir:
            path = Path(log_dir).expanduser()
            return path if path.is_absolute() else self.workspace / path
        return self.governance_dir / AUDIT_DIR

    def leadership(self, name: str) -> LeaderLock:
        return LeaderLock(self.governance_dir / name / LEADER_LOCK)

    def purge_journal(self, name: str) -> Path:
        return self.governance_dir / name

    def close(self) -> None:
        """Nothing to release: every part opens and closes its own files."""

    def __repr__(self) -> str:
        return f"FileStorage({str(self.workspace)!r})"


def storage_backend(settings: Settings, policy: Policy) -> str:
    """``"files"`` or ``"postgres"``: what the policy's ``[storage]`` table and the database URL choose.

    Raises:
        ConfigurationError: ``backend = "files"`` while a database URL is set.
    """
    chosen = policy.storage.backend
    has_url = settings.database_url is not None
    if chosen == "files" and has_url:
        raise ConfigurationError(
            f"policy {policy.id} sets [storage] backend = 'files' but GOVERNED_MEMORY_DATABASE_URL "
            "is set too; unset GOVERNED_MEMORY_DATABASE_URL to keep the workspace's files, or set "
            "[storage] backend = 'postgres' (or remove the [storage] table) to use the database"
        )
    if chosen is None:
        return "postgres" if has_url else "files"
    return chosen


def open_storage(settings: Settings, policy: Policy, workspace: Path) -> DeploymentStorage:
    """The storage :func:`storage_backend` chooses (opening it connects nothing).

    Raises:
        ConfigurationError: see :func:`storage_backend`; the PostgreSQL extra is missing.
    """
    if storage_backend(settings, policy) == "files":
        return FileStorage(workspace, keyring_dir=settings.keyring_dir)
    from .._postgres import open_storage as open_database

    url = settings.database_url.get_secret_value() if settings.database_url is not None else ""
    return open_database(url, settings=settings)


def storage_for(settings: Settings) -> DeploymentStorage:
    """The storage of ``settings`` without a Governance (the CLI's key and status commands).

    Resolves the policy for its ``[storage]`` table only: no audit or master
    key is needed to name the place.
    """
    from .._policy import resolve_policy

    policy = resolve_policy(settings).policy
    return open_storage(settings, policy, resolve_workspace(settings.workspace_dir).absolute())


def file_workspace(storage: DeploymentStorage) -> Path:
    """The folder a file storage keeps everything in (:attr:`DeploymentStorage.files`).

    What the operations that walk files as files run on (the retention
    scan, the link scan, the encrypt/decrypt-workspace migration, rotation's
    re-encryption).

    Raises:
        ConfigurationError: the deployment stores in a database.
    """
    files = storage.files
    if files is None:
        raise ConfigurationError(
            f"the deployment stores in {storage.kind} ({storage.where}), which keeps no workspace "
            "files; this operation works on the file backend only (unset "
            "GOVERNED_MEMORY_DATABASE_URL and [storage] backend to run it on a workspace)"
        )
    return files


if TYPE_CHECKING:
    _AS_STORAGE: DeploymentStorage = FileStorage(Path())
