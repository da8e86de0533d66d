"""The PostgreSQL deployment storage: every part of a Governance in one database.

A placeholder in this branch: the lead writes :func:`open_storage` at
integration, from the PostgreSQL classes of the other branches.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._errors import ConfigurationError

if TYPE_CHECKING:
    from .._policy import Settings
    from .._protocols import DeploymentStorage

__all__ = ["open_storage"]


def open_storage(url: str, *, settings: Settings) -> DeploymentStorage:
    """The deployment's storage in the database at ``url`` ("": libpq's ``PG*`` variables).

    Raises:
        ConfigurationError: always, for now.
    """
    raise ConfigurationError(
        "the settings select the PostgreSQL backend (GOVERNED_MEMORY_DATABASE_URL or [storage] "
        "backend = 'postgres'), but the PostgreSQL backend is being built and cannot store a "
        "deployment yet; unset GOVERNED_MEMORY_DATABASE_URL and [storage] backend to use the "
        "workspace's files"
    )
