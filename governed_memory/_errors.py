"""The exceptions governed_memory raises.

Every error derives from :class:`GovernedMemoryError`, so one ``except`` guards
any call. Subclasses also mix in the builtin that fits, so code written for the
reference (``except ValueError``) keeps working::

    GovernedMemoryError
    ├── ConfigurationError (ValueError)       bad argument, setting or policy
    │   └── InvalidAgentNameError             agent_name breaks a path rule
    ├── EmptySummaryError (ValueError)        compact() without a summary
    ├── StorageError (OSError)                a read or write on disk failed
    │   └── FormatVersionError                a file written by a newer version
    └── NotFoundError (LookupError)           no such agent, record or file
"""

from __future__ import annotations

__all__ = [
    "ConfigurationError",
    "EmptySummaryError",
    "FormatVersionError",
    "GovernedMemoryError",
    "InvalidAgentNameError",
    "NotFoundError",
    "StorageError",
]


class GovernedMemoryError(Exception):
    """Root of every error raised by governed_memory."""


class ConfigurationError(GovernedMemoryError, ValueError):
    """A value given in code, in the environment or in a policy is not valid."""


class InvalidAgentNameError(ConfigurationError):
    """An agent_name cannot be used as a folder name inside the workspace."""


class EmptySummaryError(GovernedMemoryError, ValueError):
    """compact() was called with an empty or missing summary."""


class StorageError(GovernedMemoryError, OSError):
    """Reading or writing memory on disk failed; the previous state is intact."""


class FormatVersionError(StorageError):
    """A file carries a format version this release cannot read."""


class NotFoundError(GovernedMemoryError, LookupError):
    """The agent, record or file asked for does not exist."""
