"""The exceptions governed_memory raises.

Every error derives from :class:`GovernedMemoryError`, so one ``except`` guards
any call. Subclasses also mix in the builtin that fits, so code written for the
reference (``except ValueError``) keeps working::

    GovernedMemoryError
    ├── ConfigurationError (ValueError)       bad argument, setting or policy
    │   └── InvalidAgentNameError             agent_name breaks a path rule
    ├── EmptySummaryError (ValueError)        compact() without a summary
    ├── ModelCallError (RuntimeError)         a model call failed (after retries)
    ├── TokenizerError (RuntimeError)         a tokenizer vocabulary is missing or corrupt
    ├── StorageError (OSError)                a read or write on disk failed
    │   └── FormatVersionError                a file written by a newer version
    ├── NotFoundError (LookupError)           no such agent, record or file
    └── ConsentRequiredError (PermissionError) the policy refuses an operation without consent
"""

from __future__ import annotations

__all__ = [
    "ConfigurationError",
    "ConsentRequiredError",
    "EmptySummaryError",
    "FormatVersionError",
    "GovernedMemoryError",
    "InvalidAgentNameError",
    "ModelCallError",
    "NotFoundError",
    "StorageError",
    "TokenizerError",
]


class GovernedMemoryError(Exception):
    """Root of every error raised by governed_memory."""


class ConfigurationError(GovernedMemoryError, ValueError):
    """A value given in code, in the environment or in a policy is not valid."""


class InvalidAgentNameError(ConfigurationError):
    """An agent_name cannot be used as a folder name inside the workspace."""


class EmptySummaryError(GovernedMemoryError, ValueError):
    """compact() was called with an empty or missing summary."""


class ModelCallError(GovernedMemoryError, RuntimeError):
    """A call to a language model (through litellm) failed or returned no usable reply."""


class TokenizerError(GovernedMemoryError, RuntimeError):
    """A tokenizer vocabulary file is missing, unreadable or fails its checksum."""


class StorageError(GovernedMemoryError, OSError):
    """Reading or writing memory on disk failed; the previous state is intact."""


class FormatVersionError(StorageError):
    """A file carries a format version this release cannot read."""


class NotFoundError(GovernedMemoryError, LookupError):
    """The agent, record or file asked for does not exist."""


class ConsentRequiredError(GovernedMemoryError, PermissionError):
    """The policy needs a consent the data subject has not given (``on_missing = "deny"``).

    Attributes:
        subject_id: the data subject (None when the message had no subject).
        purpose: the purpose that lacks consent (``persist``, ``summarize``, ...).
        operation: the governed operation that was refused.
    """

    def __init__(self, message: str, *, subject_id: str | None, purpose: str, operation: str):
        super().__init__(message)
        self.subject_id = subject_id
        self.purpose = purpose
        self.operation = operation
