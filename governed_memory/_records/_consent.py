"""The consent registry: who agreed to what, when, and under which policy.

One append-only JSON Lines file, ``<workspace>/.governed_memory/consent.jsonl``,
holds every grant and withdrawal ever made (the proof a regulator asks for).
The current state of a (subject, purpose) pair is its latest event.

Durability and concurrency:

* A writer takes an exclusive ``flock`` on ``consent.lock`` beside the log,
  repairs a torn last line a crashed writer may have left, appends one
  complete line and fsyncs before returning. An acknowledged grant or
  withdrawal survives a power cut.
* Readers take no lock. They only consume complete lines (ending in ``\\n``),
  so a half-written line is invisible until it is complete.
* Every query first ``stat``s the log: unchanged (inode, size, mtime) means the
  cached state is current; a larger file of the same inode is read from the
  last offset only. So the consent gate re-checks on every write for the
  price of one ``stat``, and a withdrawal made by another process takes
  effect at that process's next write.

Under encryption at rest (``sealing`` given) each line is a sealed envelope
(see ``_sealing``): the subject, purpose, actor and policy are never on disk
in plaintext; everything above holds unchanged, line for line.

Not safe on network filesystems with weak flock/append semantics (NFS, SMB).
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import json
import os
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any, BinaryIO

from .._base import ensure_private_dir, fsync_dir, open_private, write_all
from .._crypto import CONSENT_PURPOSE, RecordSealing, open_record, seal_record
from .._errors import ConfigurationError, FormatVersionError, StorageError

__all__ = [
    "CONSENT_FORMAT_VERSION",
    "CONSENT_LOG",
    "ConsentAction",
    "ConsentEvent",
    "ConsentRegistry",
    "open_consent_line",
    "validate_subject_id",
]

CONSENT_LOG = "consent.jsonl"
CONSENT_LOCK = "consent.lock"
CONSENT_FORMAT_VERSION = 1

_SUBJECT_MAX = 256
_TAIL = 256
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def validate_subject_id(subject_id: object) -> str:
    """Return ``subject_id`` if it can identify a data subject.

    Raises:
        ConfigurationError: not a non-empty single-line string of at most 256 characters.
    """
    if not isinstance(subject_id, str) or not subject_id.strip():
        raise ConfigurationError(
            f"subject_id {subject_id!r} must be a non-empty string, e.g. a customer number"
        )
    if len(subject_id) > _SUBJECT_MAX or _CONTROL.search(subject_id):
        raise ConfigurationError(
            f"subject_id {subject_id[:40]!r}... must be at most {_SUBJECT_MAX} characters "
            "without control characters; use a stable pseudonymous identifier"
        )
    return subject_id


class ConsentAction(StrEnum):
    """What a consent event does."""

    GRANT = "grant"
    WITHDRAW = "withdraw"


@dataclass(frozen=True)
class ConsentEvent:
    """One grant or withdrawal, as stored (one JSON line).

    ``at`` is timezone-aware ISO 8601 (the host's offset), so records from
    hosts in different zones compare correctly.
    """

    subject: str
    purpose: str
    action: ConsentAction
    at: str
    actor: str
    policy_id: str
    policy_version: str

    @property
    def granted(self) -> bool:
        return self.action is ConsentAction.GRANT

    def to_json(self) -> str:
        data: dict[str, Any] = {"v": CONSENT_FORMAT_VERSION, **asdict(self)}
        data["action"] = self.action.value
        return json.dumps(data, ensure_ascii=False, sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, line: str, where: str) -> ConsentEvent:
        try:
            data = json.loads(line)
            version = data.get("v")
        except (ValueError, AttributeError) as exc:
            raise StorageError(
                f"{where} is not a consent record ({exc}); the log is damaged"
            ) from exc
        if version != CONSENT_FORMAT_VERSION:
            raise FormatVersionError(
                f"{where} has consent format version {version!r}; this release reads "
                f"version {CONSENT_FORMAT_VERSION}. It was probably written by a newer "
                "governed_memory: upgrade this installation"
            )
        try:
            return cls(
                subject=str(data["subject"]),
                purpose=str(data["purpose"]),
                action=ConsentAction(data["action"]),
                at=str(data["at"]),
                actor=str(data["actor"]),
                policy_id=str(data["policy_id"]),
                policy_version=str(data["policy_version"]),
            )
        except (KeyError, ValueError) as exc:
            raise StorageError(f"{where} lacks a valid field {exc}; the log is damaged") from exc


def open_consent_line(raw: bytes, sealing: RecordSealing | None, where: Path) -> bytes:
    """The plaintext JSON of one line of the consent log (opened when sealed).

    Raises:
        SealedRecordError: the line is sealed and ``sealing`` is None.
        StorageError: the line is plaintext but ``sealing`` is set, or damaged.
    """
    return open_record(raw, sealing, CONSENT_PURPOSE, CONSENT_LOG, where)


class ConsentRegistry:
    """Durable per-subject, per-purpose consent, shared by every process on a workspace.

    Args:
        folder: the governance folder holding the log (created 0700 on the
            first grant or withdrawal, never by a read).
        sealing: seal each record (encryption at rest); None writes and
            reads the plaintext log.
    """

    def __init__(self, folder: Path, *, sealing: RecordSealing | None = None) -> None:
        self._folder = Path(folder)
        self.sealing = sealing
        self._path = self._folder / CONSENT_LOG
        self._path_str = os.fspath(self._path)  # stat()ed on every gate check: no pathlib there
        self._mutex = threading.RLock()
        self._state: dict[tuple[str, str], ConsentEvent] = {}
        self._events: list[ConsentEvent] = []
        self._offset = 0
        self._ident: tuple[int, int, int] | None = None
        self._tail = b""  # the last bytes read, to recognise the same file grown

    @property
    def path(self) -> Path:
        """The JSON Lines log."""
        return self._path

    # -- reading -------------------------------------------------------

    def _refresh(self) -> None:
        """Bring the cache up to date with the log (one stat when unchanged)."""
        try:
            st = os.stat(self._path_str)
        except FileNotFoundError:
            self._reset()
            return
        except OSError as exc:
            raise StorageError(f"cannot read consent log {self.path}: {exc}") from exc
        if (st.st_ino, st.st_size, st.st_mtime_ns) == self._ident:
            return
        try:
            with open(self._path_str, "rb") as handle:
                fst = os.fstat(handle.fileno())  # the file actually read, even if replaced since
                if not self._continues(handle, fst):
                    self._reset()  # replaced (retention rewrite) or truncated: read it all
                handle.seek(self._offset)
                data = handle.read()
        except OSError as exc:
            raise StorageError(f"cannot read consent log {self.path}: {exc}") from exc
        complete = data[: data.rfind(b"\n") + 1]  # a torn last line stays invisible
        fresh = []  # parsed in full before the cache changes: a bad line leaves it as it was
        for number, raw in enumerate(complete.splitlines(), start=1):
            if not raw.strip():
                continue
            where = f"consent log {self.path} (byte {self._offset}, line +{number})"
            plain = open_consent_line(raw, self.sealing, self._path)
            fresh.append(ConsentEvent.from_json(plain.decode("utf-8", errors="replace"), where))
        for event in fresh:
            self._events.append(event)
            self._state[(event.subject, event.purpose)] = event
        self._offset += len(complete)
        if complete:
            self._tail = (self._tail + complete)[-_TAIL:]
        self._ident = (fst.st_ino, fst.st_size, fst.st_mtime_ns)

    def _continues(self, handle: BinaryIO, fst: os.stat_result) -> bool:
        """Whether ``handle`` is the file already read, grown by appends only.

        Same inode and not shorter is not enough (a rewrite may reuse a freed
        inode number), so the last bytes read before must still be there.
        """
        if self._ident is None or fst.st_ino != self._ident[0] or fst.st_size < self._offset:
            return False
        handle.seek(self._offset - len(self._tail))
        return handle.read(len(self._tail)) == self._tail

    def _reset(self) -> None:
        self._state, self._events, self._offset, self._ident = {}, [], 0, None
        self._tail = b""

    def latest(self, subject_id: str, purpose: str) -> ConsentEvent | None:
        """The latest event for (subject, purpose), or None when there was none."""
        with self._mutex:
            self._refresh()
            return self._state.get((subject_id, purpose))

    def is_granted(self, subject_id: str, purpose: str) -> bool:
        """Whether ``subject_id`` currently consents to ``purpose``."""
        event = self.latest(subject_id, purpose)
        return event is not None and event.granted

    def status(self, subject_id: str) -> dict[str, ConsentEvent]:
        """The latest event per purpose for one subject."""
        with self._mutex:
            self._refresh()
            return {p: e for (s, p), e in self._state.items() if s == subject_id}

    def history(self, subject_id: str | None = None) -> list[ConsentEvent]:
        """Every event, oldest first (only ``subject_id``'s when given)."""
        with self._mutex:
            self._refresh()
            return [e for e in self._events if subject_id is None or e.subject == subject_id]

    def subjects(self) -> list[str]:
        """Every subject that has a consent record, sorted."""
        with self._mutex:
            self._refresh()
            return sorted({s for s, _ in self._state})

    # -- writing -------------------------------------------------------

    @contextmanager
    def _locked(self) -> Iterator[None]:
        ensure_private_dir(self._folder)
        fd = open_private(self._folder / CONSENT_LOCK, os.O_RDWR | os.O_CREAT)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)  # closing releases the flock

    def record(self, event: ConsentEvent) -> None:
        """Append ``event`` durably (fsynced before returning).

        Raises:
            StorageError: the log could not be written; nothing was recorded.
        """
        validate_subject_id(event.subject)
        plain = event.to_json().encode("utf-8")
        line = seal_record(plain, self.sealing, CONSENT_PURPOSE, CONSENT_LOG) + b"\n"
        try:
            with self._mutex, self._locked():
                created = not self.path.exists()
                fd = open_private(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
                try:
                    _repair_torn_tail(fd)
                    write_all(fd, line)
                    os.fsync(fd)
                finally:
                    os.close(fd)
                if created:
                    fsync_dir(self._folder)
        except OSError as exc:
            raise StorageError(
                f"cannot record consent in {self.path}: {exc}; the consent was NOT changed"
            ) from exc

    def make_event(
        self,
        subject_id: str,
        purpose: str,
        action: ConsentAction,
        *,
        at: _dt.datetime,
        actor: str,
        policy_id: str,
        policy_version: str,
    ) -> ConsentEvent:
        """Build a validated event (the time is made timezone-aware)."""
        if not actor or _CONTROL.search(actor):
            raise ConfigurationError(
                f"actor {actor!r} must be a non-empty single-line name, e.g. 'dpo@example.org'"
            )
        aware = at if at.tzinfo is not None else at.astimezone()
        return ConsentEvent(
            subject=validate_subject_id(subject_id),
            purpose=purpose,
            action=action,
            at=aware.isoformat(),
            actor=actor,
            policy_id=policy_id,
            policy_version=policy_version,
        )


def _repair_torn_tail(fd: int) -> None:
    """Cut a partial last line a crashed writer left (it was never acknowledged)."""
    size = os.fstat(fd).st_size
    if size == 0:
        return
    if os.pread(fd, 1, size - 1) == b"\n":
        return
    start = max(0, size - 65536)
    while True:
        chunk = os.pread(fd, size - start, start)
        cut = chunk.rfind(b"\n")
        if cut >= 0:
            os.ftruncate(fd, start + cut + 1)
            return
        if start == 0:
            os.ftruncate(fd, 0)
            return
        start = max(0, start - 65536)
