"""The exceptions governed_memory raises: every one is defined here.

Every error derives from :class:`GovernedMemoryError`, so one ``except``
guards any call. Subclasses also mix in the builtin that fits, so code written
for the reference (``except ValueError``) keeps working::

    GovernedMemoryError
    ├── ConfigurationError (ValueError)       bad argument, setting or policy
    │   ├── AccountsFileError                 the console's accounts file is unsafe or malformed
    │   ├── InvalidAgentNameError             agent_name breaks a path rule
    │   ├── KeyProviderError                  master key missing, malformed or exposed
    │   ├── PolicyError                       a policy file or override breaks a rule
    │   └── PurgeInFutureError                a real purge asked to run as of a future time
    ├── EmptySummaryError (ValueError)        compact() without a summary
    ├── ModelCallError (RuntimeError)         a model call failed (after retries)
    ├── TokenizerError (RuntimeError)         a tokenizer vocabulary is missing or corrupt
    ├── PurgeInProgressError (RuntimeError)   another purge holds the workspace's purge lock
    ├── ErasedDuringCompactionError (RuntimeError)  the summary uses a subject erased since
    ├── StorageError (OSError)                a read or write on disk failed
    │   ├── FormatVersionError                a file written by a newer version
    │   ├── AuditWriteError                   the audit log could not be appended to
    │   ├── JournalError                      the purge journal is damaged
    │   ├── UnsafePathError                   a symbolic link inside an agent folder (never followed)
    │   ├── DatabaseError                     the PostgreSQL server refused or lost a call (retryable)
    │   │   └── SchemaVersionError            the database's schema is not the one this release uses
    │   └── DecryptionError                   encrypted data fails to decrypt (detail-free)
    │       ├── IntegrityError                an encrypted file's structure is damaged
    │       └── KeyUnavailableError (LookupError)  the master or data key is not available
    │           ├── KeyShreddedError          the data key was destroyed (crypto-shredded)
    │           └── SealedRecordError         a governance file is sealed and cannot be opened here
    ├── NotFoundError (LookupError)           no such agent, record or file
    │   └── HoldNotFoundError                 no active legal hold matches
    ├── ConsentRequiredError (PermissionError) the policy refuses an operation without consent
    ├── ErasureBlockedError (PermissionError) a legal hold covers the data to erase
    ├── RectificationBlockedError (PermissionError) a legal hold covers the record to rectify
    └── AuditVerificationError                the audit log fails verification (tampering)

    EntryFormatError (ValueError)             internal: a line is not a well-formed audit
                                              entry (reading and verifying catch it)

The console's refusals inside a request (``NotSignedIn``, ``Forbidden``,
``CsrfRefusal``, ``OidcRefusal`` in ``governed_memory.console._auth``) are not
errors of the library: Starlette turns them into the sign-in page or a 403
before the request ends, and no caller ever sees one; they live with the console.

The sub-packages that raise an error re-export it where it used to be defined
(``governed_memory._policy.PolicyError``, ...), so their imports keep working.
A test checks that every exception class of the package is defined here and
drawn above, under its base class.
"""

from __future__ import annotations

import datetime as _dt
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

__all__ = [
    "AccountsFileError",
    "AuditVerificationError",
    "AuditWriteError",
    "ConfigurationError",
    "ConsentRequiredError",
    "DatabaseError",
    "DecryptionError",
    "EmptySummaryError",
    "EntryFormatError",
    "ErasedDuringCompactionError",
    "ErasureBlockedError",
    "FormatVersionError",
    "GovernedMemoryError",
    "HoldLike",
    "HoldNotFoundError",
    "IntegrityError",
    "InvalidAgentNameError",
    "JournalError",
    "KeyProviderError",
    "KeyShreddedError",
    "KeyUnavailableError",
    "ModelCallError",
    "NotFoundError",
    "PolicyError",
    "PurgeInFutureError",
    "PurgeInProgressError",
    "RectificationBlockedError",
    "SchemaVersionError",
    "SealedRecordError",
    "StorageError",
    "TokenizerError",
    "UnsafePathError",
]


class GovernedMemoryError(Exception):
    """Root of every error raised by governed_memory."""


class ConfigurationError(GovernedMemoryError, ValueError):
    """A value given in code, in the environment or in a policy is not valid."""


class AccountsFileError(ConfigurationError):
    """The console's accounts file is unsafe, unreadable or malformed, or a change breaks a rule."""


class InvalidAgentNameError(ConfigurationError):
    """An agent_name cannot be used as a folder name inside the workspace."""


class PolicyError(ConfigurationError):
    """A policy file cannot be loaded; the message names file, key and fix."""


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


class JournalError(StorageError):
    """The purge journal is damaged or names something that is not purgeable."""


class DatabaseError(StorageError):
    """The PostgreSQL server refused a connection or lost one mid-call; nothing acknowledged is lost.

    The message names the server (host, port, database; never the password) and the fix.
    ``retryable`` is True when the same call may succeed later (the server restarting, a
    connection dropped before the commit): the transaction was rolled back, so retrying
    repeats nothing. A connection lost while committing leaves the outcome unknown: the
    error says so and is not ``retryable`` (check what is stored before repeating the call).
    """

    def __init__(self, message: str, *, retryable: bool = False) -> None:
        super().__init__(message)
        self.retryable = retryable


class SchemaVersionError(DatabaseError):
    """The database's schema version is older or newer than this release's; run ``db upgrade``."""


class UnsafePathError(StorageError):
    """A path inside an agent's folder tree is a symbolic link, which governed_memory never follows.

    Everything under ``<workspace>/agents/<agent>/`` is the library's own, and
    it never makes a link there: a link could lead outside the workspace (and
    so make a write, a chmod, a deletion or a print happen elsewhere). The
    workspace folder and ``agents/`` themselves may be links an operator made.
    Nothing was read or written through the link.

    Attributes:
        path: the link.
    """

    def __init__(self, path: str | os.PathLike[str], what: str = "file or folder") -> None:
        self.path = Path(path)
        super().__init__(
            f"{path} is a symbolic link, and governed_memory never follows a link inside an "
            f"agent's folder (it could lead outside the workspace); nothing was read or written "
            f"through it. Replace it by the {what} it points to, or remove it"
        )


class NotFoundError(GovernedMemoryError, LookupError):
    """The agent, record or file asked for does not exist."""


class HoldNotFoundError(NotFoundError):
    """No active hold matches the id, agent or subject given."""


class PurgeInProgressError(GovernedMemoryError, RuntimeError):
    """Another purge holds this workspace's purge lock."""


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


class KeyProviderError(ConfigurationError):
    """The master key is missing, malformed, or stored where others can read it."""


class PurgeInFutureError(ConfigurationError):
    """A purge that deletes was asked to run ``as_of`` a time later than the clock's now.

    Retention floors (``audit_min_age``) and maximum ages protect data by its
    real age; a purge dated into the future would delete what is not due yet.
    Nothing was deleted.

    Attributes:
        as_of: the time asked for (naive local time).
        now: the clock's time it was compared with.
    """

    def __init__(self, as_of: _dt.datetime, now: _dt.datetime) -> None:
        self.as_of = as_of
        self.now = now
        super().__init__(
            f"purge as of {as_of:%Y-%m-%d %H:%M:%S} refused: it is later than now "
            f"({now:%Y-%m-%d %H:%M:%S}), and a purge that deletes runs at the real time only, so "
            "that no retention period or floor (audit_min_age) is cut short. Nothing was "
            "deleted. To preview that moment, run it as a dry run (governed-memory purge "
            "--dry-run --as-of ...); to delete, run it without --as-of"
        )


class DecryptionError(StorageError):
    """Encrypted data cannot be decrypted or authenticated.

    Deliberately detail-free, like Fernet's ``InvalidToken``: a wrong key, a
    flipped byte and a frame moved from another file look the same. The file
    is named and was not modified.

    Attributes:
        path: the file (None for data not read from a file).
    """

    def __init__(self, path: str | os.PathLike[str] | None, what: str = "") -> None:
        self.path = Path(path) if path is not None else None
        where = str(path) if path is not None else (what or "encrypted data")
        super().__init__(
            f"{where} cannot be decrypted: the key is wrong, or the data was altered, "
            "truncated, or moved from another file, agent or workspace. Nothing was changed; "
            "check the master key and keyring folder, or restore the file from a backup"
        )


class IntegrityError(DecryptionError):
    """An encrypted file's structure is damaged (bad header, a broken frame mid-file)."""

    def __init__(self, path: str | os.PathLike[str] | None, what: str = "") -> None:
        super().__init__(path, what)
        where = str(path) if path is not None else (what or "encrypted data")
        self.args = (
            f"{where} is damaged or not a governed_memory encrypted file of this kind: its "
            "header or frame structure is broken before the end. Nothing was changed; restore "
            "it from a backup",
        )


class KeyUnavailableError(DecryptionError, LookupError):
    """The master key or data key needed to decrypt (or wrap) is not available.

    A wrong or missing master key, or a keyring folder that does not hold the
    data key. Unlike its parent, the message is precise (key ids, the keyring
    folder): naming a key id reveals nothing about the key.
    """

    def __init__(self, message: str, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else None
        StorageError.__init__(self, message)


class KeyShreddedError(KeyUnavailableError):
    """The data key was destroyed on purpose (crypto-shredding): the data is gone."""


class SealedRecordError(KeyUnavailableError):
    """A governance file (consent, holds, erasure records) is sealed and cannot be opened here.

    Raised when a sealed file is read without encryption in the policy, or
    without a usable master key or keyring. Names the file; nothing was changed.

    Attributes:
        path: the sealed file.
    """

    def __init__(self, path: str | os.PathLike[str], why: str = "") -> None:
        cause = (
            why or "the policy in force does not enable encryption, so no key is at hand to open it"
        )
        super().__init__(
            f"{path} holds sealed (encrypted) governance records and cannot be read: {cause}. "
            "Use the workspace's policy with [encryption] enabled = true and its master key "
            "(GOVERNED_MEMORY_MASTER_KEY or GOVERNED_MEMORY_MASTER_KEY_FILE, and "
            "GOVERNED_MEMORY_KEYRING_DIR if the keyring lives elsewhere). Nothing was changed",
            path,
        )


class AuditWriteError(StorageError):
    """The audit log could not be appended to, so the operation reports failure.

    The operation's own change may already be on disk (the audit entry is
    written after it, before success is reported); it is not reported as done.
    """


class AuditVerificationError(GovernedMemoryError):
    """The audit log fails verification: an entry was altered, removed, inserted or reordered."""


class EntryFormatError(ValueError):
    """A line is not a well-formed audit entry (internal to reading and verifying)."""


class HoldLike(Protocol):
    """What :class:`ErasureBlockedError` reads of a legal hold (:class:`governed_memory.Hold`).

    A Protocol, because holds live in a layer above this module.
    """

    @property
    def id(self) -> str: ...

    @property
    def reason(self) -> str: ...

    @property
    def placed_by(self) -> str: ...

    @property
    def placed_at(self) -> str: ...

    @property
    def agent(self) -> str | None: ...

    @property
    def subject(self) -> str | None: ...

    @property
    def target(self) -> str: ...


def describe_holds(holds: Sequence[HoldLike]) -> str:
    """Each hold's id, target, who placed it, when and why, for a refusal's message."""
    return "; ".join(
        f"hold {h.id!r} on {h.target} placed by {h.placed_by!r} on {h.placed_at} "
        f"because {h.reason!r}"
        for h in holds
    )


class ErasureBlockedError(GovernedMemoryError, PermissionError):
    """An erasure was refused because a legal hold applies; nothing was erased.

    Attributes:
        holds: the holds that block it (id, who placed it, why).
    """

    def __init__(self, scope: str, holds: Sequence[HoldLike]) -> None:
        self.holds = tuple(holds)
        described = describe_holds(self.holds)
        super().__init__(
            f"erasure of {scope} refused: a legal hold applies ({described}). Nothing was "
            "erased. Ask the hold's owner to release it (governed-memory hold release), then "
            "run the erasure again"
        )


class RectificationBlockedError(GovernedMemoryError, PermissionError):
    """A rectification was refused because a legal hold applies; nothing was changed.

    A hold preserves the data as it is, as evidence: correcting a held record
    would alter that evidence, so the hold must be released first.

    Attributes:
        holds: the holds that block it (id, who placed it, why).
    """

    def __init__(self, what: str, holds: Sequence[HoldLike]) -> None:
        self.holds = tuple(holds)
        described = describe_holds(self.holds)
        super().__init__(
            f"rectification of {what} refused: a legal hold applies ({described}). A hold "
            "keeps the data as it is, as evidence; nothing was changed. Ask the hold's owner "
            "to release it (governed-memory hold release), then rectify again; meanwhile tell "
            "the person the correction is recorded and waits on the hold (docs/rectification.md)"
        )


class ErasedDuringCompactionError(GovernedMemoryError, RuntimeError):
    """The summary passed to compact() was built from messages of a subject erased since.

    The Conversation has already dropped those messages; summarise the
    history again (it no longer holds them) and call compact() with the new
    summary. Nothing was written.
    """

    def __init__(self, subjects: Sequence[str]) -> None:
        self.subjects = tuple(sorted(subjects))
        super().__init__(
            f"compact() refused: the summary was built from messages of {len(self.subjects)} "
            "data subject(s) erased after this conversation loaded them; those messages have "
            "been dropped from the history. Summarise the history again and call compact() "
            "with the new summary"
        )
