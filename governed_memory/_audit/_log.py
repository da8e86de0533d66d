"""The audit log on disk: hash-chained JSON Lines in period segments, plus a head file.

Layout of the audit folder (default ``<workspace>/.governed_memory/audit/``,
0700, files 0600)::

    audit-2026-11.jsonl   a segment: the entries of one period (UTC month by default)
    audit-2026-12.jsonl
    audit.head            seq + hash of the newest durable entry, MACed; also the lock file
    audit.tail            seq + hash + end offset of the newest written entry, MACed

Each segment starts with an anchor entry (``audit.segment``) naming the
segment before it; the anchor is chained like any entry, so the chain runs
unbroken across segments. Segments are ordered by the ``seq`` of their anchor,
not by name.

Appending (one ``flock`` on ``audit.head`` serialises threads and processes
while they write; nobody holds it while the disk flushes):

1. find the newest entry: cached; after another writer's append, taken from
   ``audit.tail`` when the segment ends exactly where that hint says (no
   re-reading of the log); read from the segment otherwise;
2. if the head records an entry the segments no longer hold (entries removed
   from the end) or the head is missing/unreadable while entries exist, write
   an ``audit.discontinuity`` entry that records both, so the gap stays
   visible to ``verify`` forever;
3. close off a torn last line left by a crash (see below);
4. start a new segment, atomically with its anchor, when the period changed;
5. write the line with one ``write`` on an ``O_APPEND`` descriptor and the
   hint in ``audit.tail``, release the lock;
6. ``fdatasync`` the segment through a :class:`~governed_memory._base.GroupSync`
   (group commit: one call covers every entry written before it started,
   so concurrent writers share it): the entry is durable before
   :meth:`AuditLog.append` returns;
7. rewrite the head in place (``pwrite``; not fsynced, see below), only
   now: it never names an entry that is not yet durable.

Torn lines: a crash (kill -9, power loss) during step 5 can leave a partial
last line. The next append (or ``governed-memory audit repair``) ends it with
a newline and appends an ``audit.repair`` entry recording the torn line's
segment, line number, length and SHA-256. Nothing is deleted: the torn bytes
stay as evidence, and ``verify`` accepts a non-entry line only when a repair
entry vouches for exactly those bytes. A partial line that is in fact a
complete, authentic entry (only the newline was lost) is just completed.

Limits (stated honestly): the head is not fsynced and concurrent writers
publish it in any order, so it may lag the log by a few entries, after a
power loss too (``verify`` accepts a head behind the log, never ahead of it). Someone with write access to the folder who also keeps an
old copy of the head can remove the newest entries undetected; ship spans to
a collector (docs/audit.md) for an off-host record. POSIX only; not safe on
network filesystems.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import fcntl
import hashlib
import json
import os
import threading
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._base import (
    Clock,
    GroupSync,
    SystemClock,
    ensure_private_dir,
    fsync_dir,
    link_exclusive,
    open_private,
    remove_stale_temps,
    write_all,
)
from .._errors import AuditWriteError, ConfigurationError, NotFoundError
from ._binding import WORKSPACE_ID_ATTR, read_workspace_id, workspace_id
from ._entry import (
    FORMAT_VERSION,
    GENESIS,
    AuditEntry,
    EntryFormatError,
    canonical,
    format_ts,
    parse_entry,
    seal,
    seal_head,
    utc_now,
)
from ._events import AuditEvent, validate_event
from ._keys import AuditKey, AuditKeyLike, as_audit_key

if TYPE_CHECKING:
    from .._protocols import AuditStorage

__all__ = [
    "HEAD_FILE",
    "HEAD_SIZE",
    "SEGMENT_PREFIX",
    "SEGMENT_SUFFIX",
    "AuditLog",
    "Head",
    "Period",
    "SegmentInfo",
    "iter_entries",
    "list_segments",
    "parse_head",
    "read_segment_lines",
    "rekey_endorsement",
    "reverse_lines",
    "tail_entries",
]

SEGMENT_PREFIX = "audit-"
SEGMENT_SUFFIX = ".jsonl"
HEAD_FILE = "audit.head"
TAIL_FILE = "audit.tail"
HEAD_SIZE = 512
_CHUNK = 65536


class Period(StrEnum):
    """How long one segment file covers (UTC)."""

    MONTH = "month"
    DAY = "day"

    def label(self, when: _dt.datetime) -> str:
        utc = when if when.tzinfo is _dt.UTC else when.astimezone(_dt.UTC)
        if utc.year < 1000:  # strftime does not pad the year
            return utc.strftime("%Y-%m") if self is Period.MONTH else utc.strftime("%Y-%m-%d")
        # (strftime's text, without its cost: this labels every entry appended)
        if self is Period.MONTH:
            return f"{utc.year:04d}-{utc.month:02d}"
        return f"{utc.year:04d}-{utc.month:02d}-{utc.day:02d}"


@dataclass(frozen=True)
class Head:
    """What ``audit.head`` records: the newest entry when it was written."""

    seq: int
    hash: str
    segment: str
    mac: str

    def body(self) -> bytes:
        return canonical(
            {"v": FORMAT_VERSION, "seq": self.seq, "hash": self.hash, "segment": self.segment}
        )

    def mac_ok(self, key: AuditKey) -> bool:
        return key.verify_mac(b"head\x00" + self.body(), self.mac)


def _encode_head(key: AuditKey, seq: int, digest: str, segment: str) -> bytes:
    data = seal_head(key, seq, digest, segment)
    if len(data) >= HEAD_SIZE:
        raise ConfigurationError(
            f"segment name {segment!r} is too long for the head file; use a shorter audit folder name"
        )
    return data + b" " * (HEAD_SIZE - 1 - len(data)) + b"\n"


def parse_head(raw: bytes) -> Head | None:
    """The head in ``raw`` (None when empty).

    Raises:
        EntryFormatError: the head is not readable.
    """
    if not raw.strip():
        return None
    try:
        data = json.loads(raw.decode("utf-8"))
        head = Head(seq=data["seq"], hash=data["hash"], segment=data["segment"], mac=data["mac"])
    except (UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise EntryFormatError(f"head file is not readable ({exc})") from None
    if data.get("v") != FORMAT_VERSION or not isinstance(head.seq, int):
        raise EntryFormatError("head file has an unknown format")
    return head


def _hint_body(seq: int, digest: str, segment: str, end: int) -> bytes:
    # Formatted directly (every append writes one): the values are an int, hex and a
    # segment name of the folder's own, which need no escaping.
    return (
        f'{{"v":{FORMAT_VERSION},"seq":{seq},"hash":"{digest}","segment":"{segment}","end":{end}}}'
    ).encode()


def _encode_hint(key: AuditKey, seq: int, digest: str, segment: str, end: int) -> bytes:
    """The ``audit.tail`` hint: the newest written entry and where its segment ends."""
    body = _hint_body(seq, digest, segment, end)
    data = body[:-1] + b',"mac":"' + key.mac(b"tail\x00" + body).encode() + b'"}'
    return data + b" " * (HEAD_SIZE - 1 - len(data)) + b"\n"  # _encode_head checked the length


def _parse_hint(key: AuditKey, raw: bytes) -> tuple[int, str, str, int] | None:
    """``(seq, hash, segment, end)`` of an authentic hint, else None (a writer then reads the log)."""
    try:
        data = json.loads(raw)
        seq, digest, segment, end = data["seq"], data["hash"], data["segment"], data["end"]
        if not (isinstance(seq, int) and isinstance(end, int) and data.get("v") == FORMAT_VERSION):
            return None
        body = _hint_body(seq, str(digest), str(segment), end)
        if not key.verify_mac(b"tail\x00" + body, str(data["mac"])):
            return None
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    return seq, str(digest), str(segment), end


@dataclass(frozen=True)
class SegmentInfo:
    """One segment file and the seq of its first entry (None when unreadable)."""

    name: str
    path: Path
    first_seq: int | None

    def last_entry(self) -> AuditEntry | None:
        """The segment's last readable entry, read now; None when it has none (or is gone).

        Retention ages a segment by it: a segment holds nothing newer.

        Raises:
            OSError: the segment exists but cannot be read.
        """
        return _last_entry(self.path)


def _is_segment(name: str) -> bool:
    return name.startswith(SEGMENT_PREFIX) and name.endswith(SEGMENT_SUFFIX)


def _label(name: str) -> str:
    return name[len(SEGMENT_PREFIX) : -len(SEGMENT_SUFFIX)]


def _first_line(path: Path) -> bytes:
    with open(path, "rb") as file:
        buf = b""
        while b"\n" not in buf:
            chunk = file.read(_CHUNK)
            if not chunk:
                break
            buf += chunk
    return buf.split(b"\n", 1)[0]


def list_segments(folder: Path) -> list[SegmentInfo]:
    """The segment files in ``folder``, ordered by the seq of their first entry."""
    try:
        names = [n for n in os.listdir(folder) if _is_segment(n)]
    except FileNotFoundError:
        return []
    infos = []
    for name in names:
        path = folder / name
        try:
            first: int | None = parse_entry(_first_line(path)).seq
        except (EntryFormatError, OSError):
            first = None
        infos.append(SegmentInfo(name, path, first))
    return sorted(infos, key=lambda s: (s.first_seq is None, s.first_seq or 0, s.name))


def reverse_lines(fd: int, size: int) -> Iterator[tuple[int, bytes, bool]]:
    """``(offset, line, terminated)`` of the file's lines, last first, reading backwards.

    ``terminated`` is False only for a last line that lacks its newline.
    """
    if size <= 0:
        return
    terminated = os.pread(fd, 1, size - 1) == b"\n"
    pos = size - 1 if terminated else size
    buf = b""
    first = True
    while True:
        idx = buf.rfind(b"\n")
        if idx >= 0:
            yield pos + idx + 1, buf[idx + 1 :], terminated or not first
            buf = buf[:idx]
            first = False
            continue
        if pos == 0:
            yield 0, buf, terminated or not first
            return
        step = min(_CHUNK, pos)
        pos -= step
        buf = os.pread(fd, step, pos) + buf


def read_segment_lines(path: Path) -> tuple[list[bytes], bool]:
    """All lines of a segment (without newlines) and whether the last one was terminated."""
    data = path.read_bytes()
    if not data:
        return [], True
    terminated = data.endswith(b"\n")
    lines = (data[:-1] if terminated else data).split(b"\n")
    return lines, terminated


@dataclass
class _Tail:
    """What the appender knows about the end of the log (valid while the lock is held)."""

    segment: str | None = None
    fd: int | None = None
    ident: tuple[int, int] | None = None
    size: int = 0
    last: AuditEntry | None = None
    hinted: tuple[int, str] | None = None
    """Seq and hash of the newest entry, from another writer's hint (``last`` is then None)."""
    hint_bytes: bytes = b""
    repaired: list[AuditEntry] = field(default_factory=list)
    """Entries the last resync wrote (discontinuity, repair)."""

    @property
    def next_seq(self) -> int:
        if self.last:
            return self.last.seq + 1
        return self.hinted[0] + 1 if self.hinted else 1

    @property
    def prev(self) -> str:
        if self.last:
            return self.last.hash
        return self.hinted[1] if self.hinted else GENESIS


class AuditLog:
    """Appends authenticated, hash-chained entries to the audit folder.

    Safe across threads and processes on one machine. Every method that
    writes holds the folder's lock (``flock`` on ``audit.head``) while it
    writes; :meth:`append` releases it before its ``fdatasync``.

    Args:
        folder: the audit folder (created 0700 by the first append).
        key: authenticates entries: an :class:`AuditKey`, or its hex/base64 text
            or raw bytes.
        workspace: the workspace this log belongs to: every segment anchor
            names its id (``workspace_id``, from
            ``<workspace>/.governed_memory/audit-workspace-id``, created on
            the first anchor), so ``verify`` can tell another workspace's log
            (see :mod:`._binding`). None writes unbound anchors.
        previous_keys: audit keys the log may have been written with before
            ``key`` (an audit key derived from a master key that was since
            rotated). A log whose newest entry is signed by one of them is
            continued under ``key`` after an ``audit.rekey`` entry that the
            old key endorses (see :func:`rekey_endorsement`); a log under any
            other key is refused.
        clock: time of entries (default: the system clock; naive times are
            local time, stored as UTC).
        period: one segment per UTC ``month`` (default) or ``day``.
        fsync: ``fdatasync`` each entry before returning (default True; only
            benchmarks turn it off).
        syncer: runs the ``fdatasync`` calls, shared by the threads that append
            at the same time (group commit; default: this log's own).
    """

    def __init__(
        self,
        folder: str | os.PathLike[str],
        key: AuditKeyLike,
        *,
        clock: Clock | None = None,
        period: Period | str = Period.MONTH,
        fsync: bool = True,
        previous_keys: Iterable[AuditKeyLike] = (),
        workspace: str | os.PathLike[str] | None = None,
        syncer: GroupSync | None = None,
    ) -> None:
        self._folder = Path(folder)
        self._workspace = Path(workspace) if workspace is not None else None
        self._workspace_id: str | None = None
        self._key = as_audit_key(key)
        self._previous = {
            k.key_id: k for k in map(as_audit_key, previous_keys) if k.key_id != self._key.key_id
        }
        self._clock: Clock = clock or SystemClock()
        self._now = utc_now(self._clock)
        try:
            self._period = Period(period)
        except ValueError:
            raise ConfigurationError(
                f"audit segment period {period!r} is unknown; use 'month' or 'day'"
            ) from None
        self._fsync = fsync
        self._syncer = syncer if syncer is not None else GroupSync()
        self._mutex = threading.RLock()
        self._head_fd: int | None = None
        self._hint_fd: int | None = None
        self._published = 0  # seq of the newest head this object wrote
        self._head_ident: tuple[int, int] | None = None
        self._tail: _Tail | None = None
        self._seen: Head | None = None  # the newest entry this object wrote or read

    @property
    def folder(self) -> Path:
        return self._folder

    @property
    def key(self) -> AuditKey:
        return self._key

    @property
    def clock(self) -> Clock:
        """The time of the entries."""
        return self._clock

    @property
    def previous_keys(self) -> list[AuditKey]:
        """Earlier versions of the key this log accepts (see ``previous_keys``)."""
        return list(self._previous.values())

    @property
    def workspace(self) -> Path | None:
        """The workspace the log is bound to (None: unbound)."""
        return self._workspace

    @property
    def head_path(self) -> Path:
        return self._folder / HEAD_FILE

    # -- locking -----------------------------------------------------------

    def _open_head(self) -> int:
        if self._head_fd is not None:
            try:
                st = os.stat(self.head_path)
                if (st.st_dev, st.st_ino) == self._head_ident:
                    return self._head_fd
            except FileNotFoundError:
                pass
            self._drop()
        missing = [p for p in (self._folder, *self._folder.parents[:2]) if not p.exists()]
        ensure_private_dir(self._folder)
        for created in missing:  # make new folders' entries durable in their parents
            fsync_dir(created.parent)
        fd = open_private(self.head_path, os.O_RDWR | os.O_CREAT)
        st = os.fstat(fd)
        self._head_fd, self._head_ident = fd, (st.st_dev, st.st_ino)
        self._open_hint()
        return fd

    def _open_hint(self) -> int:
        if self._hint_fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._hint_fd)
            self._hint_fd = None
        self._hint_fd = open_private(self._folder / TAIL_FILE, os.O_RDWR | os.O_CREAT)
        return self._hint_fd

    @contextlib.contextmanager
    def _locked(self, what: str) -> Iterator[int]:
        with self._mutex:
            try:
                fd = self._open_head()
                fcntl.flock(fd, fcntl.LOCK_EX)
            except OSError as exc:
                raise AuditWriteError(self._failure(what, exc)) from exc
            try:
                yield fd
            except OSError as exc:
                self._forget_tail()
                if isinstance(exc, AuditWriteError):
                    raise
                raise AuditWriteError(self._failure(what, exc)) from exc
            except BaseException:
                self._forget_tail()
                raise
            finally:
                with contextlib.suppress(OSError):
                    fcntl.flock(fd, fcntl.LOCK_UN)

    def _failure(self, what: str, exc: BaseException) -> str:
        return (
            f"cannot {what} the audit log in {self._folder}: {exc}; the operation is not "
            "reported as done. Check free space and permissions of the folder (policy "
            "audit.log_dir), then run `governed-memory audit verify`"
        )

    # -- appending -----------------------------------------------------------

    def append(
        self,
        event: str,
        attrs: Mapping[str, Any],
        *,
        at: _dt.datetime | None = None,
    ) -> AuditEntry:
        """Append one entry; it is durable when this returns.

        ``attrs`` are written as given: pass them through
        :func:`~governed_memory._audit._events.audit_attributes` first (the
        :class:`AuditTrail` does).

        Raises:
            AuditWriteError: the entry could not be written (the cause is chained).
        """
        validate_event(event)
        when = at if at is not None else self._now()
        with self._locked("append to") as head_fd:
            tail = self._current(head_fd)
            creates = tail.segment is None  # this append starts the log
            entry = self._write_entry(head_fd, tail, event, dict(attrs), when)
            if not self._fsync or creates:
                # A log's first entries are named in the head before the lock is
                # released: a writer in another process must never find entries
                # and no head, which reads as a removed head (a discontinuity).
                self._flush(tail)
                self._write_head(head_fd, tail)
                return entry
            self._write_hint(tail)
            assert tail.fd is not None and tail.ident is not None and tail.segment is not None
            # Kept open across the sync: another thread may close or replace
            # the log's own descriptors once the lock is released.
            fds = os.dup(tail.fd), os.dup(head_fd)
            ident, segment = tail.ident, tail.segment
        self._settle(fds, ident, entry, segment)
        return entry

    def _settle(
        self, fds: tuple[int, int], ident: tuple[int, int], entry: AuditEntry, segment: str
    ) -> None:
        """Make ``entry`` durable (group commit, no lock held), then name it in the head."""
        segment_fd, head_fd = fds
        try:
            self._syncer.sync(segment_fd, ident)
            if entry.seq > self._published:  # a newer head from this process stays
                self._published = entry.seq
                os.pwrite(head_fd, _encode_head(self._key, entry.seq, entry.hash, segment), 0)
        except OSError as exc:
            with self._mutex:
                self._forget_tail()
            raise AuditWriteError(self._failure("append to", exc)) from exc
        finally:
            os.close(segment_fd)
            os.close(head_fd)

    def append_after(
        self,
        event: str,
        attrs_of: Callable[[AuditEntry | None], Mapping[str, Any]],
    ) -> AuditEntry:
        """Append one entry whose attributes are made from the newest entry, under the lock.

        ``attrs_of`` is given the newest entry (None in an empty log), read
        under the lock, so no other append can come between the two: an
        ``audit.checkpoint`` signs exactly the head it follows.

        Raises:
            AuditWriteError: the entry could not be written.
        """
        validate_event(event)
        with self._locked("append to") as head_fd:
            tail = self._current(head_fd)
            if tail.last is None and tail.hinted is not None:  # only its seq and hash known
                self._forget_tail()
                tail = self._current(head_fd)
            attrs = dict(attrs_of(tail.last))
            entry = self._write_entry(head_fd, tail, event, attrs, self._clock.now())
            self._flush(tail)
            self._write_head(head_fd, tail)
            return entry

    def import_entry(self, entry: AuditEntry, segment: str) -> None:
        """Append ``entry`` exactly as stored elsewhere, in ``segment``, durably, and name it in the head.

        For a migration: the entry keeps its seq, hash, prev and MAC (its line is
        written byte for byte), so ``audit verify`` and the checkpoints signed
        before accept the copy. It must come after the newest entry.

        Raises:
            AuditWriteError: ``segment`` is no segment name, ``entry`` does not
                follow the newest entry, or the folder cannot be written.
        """
        if not _is_segment(segment) or "/" in segment:
            raise AuditWriteError(
                f"audit segment {segment!r} cannot be imported into {self._folder}: use a "
                f"name like {SEGMENT_PREFIX}2026-11{SEGMENT_SUFFIX}"
            )
        with self._locked("import into") as head_fd:
            self._forget_tail()
            segments = list_segments(self._folder)
            last = segments[-1].last_entry() if segments else None
            if last is not None and entry.seq <= last.seq:
                raise AuditWriteError(
                    f"audit entry seq {entry.seq} cannot be imported into {self._folder}: the "
                    f"log already ends at seq {last.seq}; import into an empty log, oldest "
                    "entry first"
                )
            path = self._folder / segment
            created = not path.exists()
            fd = open_private(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
            try:
                write_all(fd, entry.line + b"\n")
                os.fsync(fd)
            finally:
                os.close(fd)
            if created:
                fsync_dir(self._folder)
            os.pwrite(head_fd, _encode_head(self._key, entry.seq, entry.hash, segment), 0)
            os.fsync(head_fd)
            self._published = max(self._published, entry.seq)

    def repair(self) -> list[AuditEntry]:
        """Close off a torn last line and record head discontinuities now.

        Every append does the same first; this is for an idle log after a
        crash. Returns the entries written (empty when nothing needed repair).
        """
        with self._locked("repair") as head_fd:
            self._forget_tail()
            return list(self._current(head_fd).repaired)

    # -- the state of the end of the log -----------------------------------

    def _forget_tail(self) -> None:
        if self._tail is not None and self._tail.fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._tail.fd)
        self._tail = None

    def _current(self, head_fd: int) -> _Tail:
        assert self._hint_fd is not None
        hint = os.pread(self._hint_fd, HEAD_SIZE, 0)
        tail = self._tail
        if tail is not None and tail.segment is not None:
            try:
                st = os.stat(self._folder / tail.segment)
            except FileNotFoundError:
                st = None
            if st is not None and (st.st_dev, st.st_ino) == tail.ident:
                if tail.hint_bytes == hint and st.st_size == tail.size:
                    return tail  # nobody appended since this object did
                found = _parse_hint(self._key, hint) if tail.hint_bytes != hint else None
                if found is not None and found[2] == tail.segment and found[3] == st.st_size:
                    # Another writer appended and left the segment ending where
                    # its hint says: continue after its entry without reading it.
                    tail.last, tail.hinted = None, (found[0], found[1])
                    tail.size, tail.hint_bytes = st.st_size, hint
                    self._remember(tail)
                    return tail
        self._forget_tail()
        self._open_hint()  # a replaced audit.tail is followed from now on
        tail = self._resync(head_fd, os.pread(head_fd, HEAD_SIZE, 0))
        self._tail = tail
        self._remember(tail)
        return tail

    def _open_segment(self, tail: _Tail, name: str) -> None:
        if tail.fd is not None:
            os.close(tail.fd)
            tail.fd = None
        fd = open_private(self._folder / name, os.O_RDWR | os.O_APPEND)
        st = os.fstat(fd)
        tail.segment, tail.fd, tail.ident, tail.size = name, fd, (st.st_dev, st.st_ino), st.st_size

    def _resync(self, head_fd: int, head_bytes: bytes) -> _Tail:
        """Read the end of the log from disk; repair and record what a crash or an edit left."""
        remove_stale_temps(self._folder)
        tail = _Tail()
        written = tail.repaired
        segments = self._drop_empty_segments(list_segments(self._folder))
        torn: list[tuple[int, bytes, bool]] = []
        rekey_from: AuditKey | None = None
        if segments:
            self._open_segment(tail, segments[-1].name)
            assert tail.fd is not None
            found_size = tail.size
            for offset, line, terminated in reverse_lines(tail.fd, tail.size):
                try:
                    entry = parse_entry(line)
                except EntryFormatError:
                    torn.append((offset, line, terminated))
                    continue
                if not terminated and not entry.mac_ok(self._key):
                    torn.append((offset, line, terminated))
                    continue
                tail.last = entry
                if not terminated:  # complete entry that lost only its newline
                    self._raw_write(tail, b"\n")
                break
            if tail.last is None:
                raise AuditWriteError(
                    f"the newest audit segment {tail.segment} in {self._folder} holds no readable "
                    "entry; run `governed-memory audit verify` and restore the folder from a backup"
                )
            if tail.last.kid != self._key.key_id:
                old_key = self._previous.get(tail.last.kid)
                if old_key is None or not tail.last.mac_ok(old_key):
                    raise AuditWriteError(
                        f"the audit log in {self._folder} was written with key id "
                        f"{tail.last.kid}, but the configured audit key has id "
                        f"{self._key.key_id}; configure the original GOVERNED_MEMORY_AUDIT_KEY "
                        "(or, when the audit key derives from a master key you are rotating, "
                        "give the previous master key as GOVERNED_MEMORY_MASTER_KEY_OLD[_FILE]), "
                        "or point audit.log_dir at a new folder to start a new log with this key"
                    )
                rekey_from = old_key
        problem = self._head_problem(head_bytes, tail, rekey_from)
        for _offset, _line, terminated in torn:
            if not terminated:
                self._raw_write(tail, b"\n")
        if rekey_from is not None:
            # Before anything else is signed with the new key: the old key vouches
            # for the change, so a verifier holding both sees one unbroken chain.
            assert tail.last is not None
            attrs_rekey: dict[str, Any] = {
                "old_key_id": rekey_from.key_id,
                "new_key_id": self._key.key_id,
                "endorsement": rekey_endorsement(
                    rekey_from, tail.next_seq, tail.prev, self._key.key_id
                ),
            }
            written.append(
                self._write_entry(head_fd, tail, AuditEvent.REKEY, attrs_rekey, self._clock.now())
            )
        if problem is not None:
            reason, head = problem
            attrs: dict[str, Any] = {
                "reason_code": reason,
                "found_seq": tail.last.seq if tail.last else 0,
                "found_hash": tail.prev,
            }
            seq = tail.next_seq
            if head is not None:
                attrs.update(head_seq=head.seq, head_hash=head.hash, segment=head.segment)
                seq = max(seq, head.seq + 1)
            written.append(
                self._write_entry(
                    head_fd, tail, AuditEvent.DISCONTINUITY, attrs, self._clock.now(), seq=seq
                )
            )
        for offset, line, _terminated in reversed(torn):
            assert tail.fd is not None and tail.segment is not None
            attrs = {
                "segment": tail.segment,
                "line": _line_number(tail.fd, offset),
                "bytes": len(line),
                "sha256": hashlib.sha256(line).hexdigest(),
            }
            written.append(
                self._write_entry(head_fd, tail, AuditEvent.REPAIR, attrs, self._clock.now())
            )
        bind = self._unbound_workspace(segments)
        if bind is not None:
            written.append(
                self._write_entry(
                    head_fd, tail, AuditEvent.BIND, {WORKSPACE_ID_ATTR: bind}, self._clock.now()
                )
            )
        if written or (segments and tail.size != found_size):
            self._flush(tail)  # repairs are durable before anything chains after them
        if written:
            self._write_head(head_fd, tail)
        return tail

    def _unbound_workspace(self, segments: list[SegmentInfo]) -> str | None:
        """The id to bind a log from before workspace binding with now, else None.

        Only when this workspace has no id yet: once it has one, its newest
        segment is bound (by its anchor or by this entry), and an unbound log
        found later is for ``verify`` to report, not for the writer to adopt.
        """
        if self._workspace is None or not segments or read_workspace_id(self._workspace):
            return None
        try:
            anchor = parse_entry(_first_line(segments[-1].path))
        except (EntryFormatError, OSError):
            return None
        if WORKSPACE_ID_ATTR in anchor.attrs:
            return None
        self._workspace_id = workspace_id(self._workspace)
        return self._workspace_id

    def _remember(self, tail: _Tail) -> None:
        if tail.segment is not None and (tail.last is not None or tail.hinted is not None):
            self._seen = Head(tail.next_seq - 1, tail.prev, tail.segment, "")

    def _drop_empty_segments(self, segments: list[SegmentInfo]) -> list[SegmentInfo]:
        # A segment is created complete with its anchor; an empty file is only
        # left by a crash on a filesystem without hard links. It holds nothing.
        kept = []
        for segment in segments:
            try:
                empty = segment.path.stat().st_size == 0
            except FileNotFoundError:
                continue
            if empty:
                segment.path.unlink(missing_ok=True)
            else:
                kept.append(segment)
        return kept

    def _head_problem(
        self, head_bytes: bytes, tail: _Tail, old_key: AuditKey | None = None
    ) -> tuple[str, Head | None] | None:
        try:
            head = parse_head(head_bytes)
        except EntryFormatError:
            return ("head_unreadable", None) if tail.last else None
        head_key = old_key or self._key  # the head was written with the log's key until now
        if head is not None and not head.mac_ok(head_key):
            return ("head_unauthenticated", None) if tail.last else None
        last = tail.last
        seen = self._seen
        if last is None and head is None and seen is not None:
            # The whole log vanished (folder emptied or replaced) under a live writer.
            return "log_missing", seen
        if head is None:
            return ("head_missing", None) if last is not None else None
        if last is None:
            return "segments_missing", head
        if head.seq > last.seq:
            return "head_ahead", head
        if head.seq == last.seq and head.hash != last.hash:
            return "head_mismatch", head
        return None

    # -- writing -------------------------------------------------------------

    def _raw_write(self, tail: _Tail, data: bytes) -> None:
        """Write at the end of the segment; durable only after :meth:`_flush` (or a group sync)."""
        assert tail.fd is not None
        write_all(tail.fd, data)
        tail.size += len(data)

    def _flush(self, tail: _Tail) -> None:
        """Make what was written to the segment durable now (lock held: rare writes only)."""
        if self._fsync and tail.fd is not None and tail.ident is not None:
            self._syncer.sync(tail.fd, tail.ident)

    def _write_entry(
        self,
        head_fd: int,
        tail: _Tail,
        event: str,
        attrs: dict[str, Any],
        when: _dt.datetime,
        *,
        seq: int | None = None,
    ) -> AuditEntry:
        ts = format_ts(when)
        label = (
            ts[:7] if self._period is Period.MONTH else ts[:10]
        )  # Period.label, from the UTC text
        if tail.segment is None or label > _label(tail.segment):
            self._start_segment(tail, label, when)
        entry = seal(
            seq=seq if seq is not None else tail.next_seq,
            ts=ts,
            event=event,
            attrs=attrs,
            prev=tail.prev,
            key=self._key,
        )
        self._raw_write(tail, entry.line + b"\n")
        tail.last = entry
        return entry

    def _start_segment(self, tail: _Tail, label: str, when: _dt.datetime) -> None:
        name = f"{SEGMENT_PREFIX}{label}{SEGMENT_SUFFIX}"
        # The new segment's anchor is durable at once (link_exclusive): the
        # entries it chains after must be too, or a power cut could leave an
        # anchor following nothing.
        self._flush(tail)
        attrs: dict[str, Any] = {"segment": name, "previous_segment": tail.segment}
        if self._workspace is not None:
            if self._workspace_id is None:
                self._workspace_id = workspace_id(self._workspace)
            attrs[WORKSPACE_ID_ATTR] = self._workspace_id
        anchor = seal(
            seq=tail.next_seq,
            ts=format_ts(when),
            event=AuditEvent.SEGMENT,
            attrs=attrs,
            prev=tail.prev,
            key=self._key,
        )
        try:
            link_exclusive(self._folder, anchor.line + b"\n", [name])
        except FileExistsError:
            if tail.segment is None:
                raise
            return  # the clock went back to a period that has a segment: stay in the newest
        self._open_segment(tail, name)
        tail.last = anchor

    def _write_head(self, head_fd: int, tail: _Tail) -> None:
        """Name the newest entry in the head (and the hint); only once it is durable."""
        if tail.last is None or tail.segment is None:
            return
        data = _encode_head(self._key, tail.last.seq, tail.last.hash, tail.segment)
        os.pwrite(head_fd, data, 0)
        self._published = max(self._published, tail.last.seq)
        if os.fstat(head_fd).st_size > HEAD_SIZE:
            os.ftruncate(head_fd, HEAD_SIZE)
        self._write_hint(tail)

    def _write_hint(self, tail: _Tail) -> None:
        """Tell the next writer where the chain ends, so it need not read the segment."""
        if tail.last is None or tail.segment is None or self._hint_fd is None:
            return
        data = _encode_hint(self._key, tail.last.seq, tail.last.hash, tail.segment, tail.size)
        os.pwrite(self._hint_fd, data, 0)
        tail.hint_bytes = data
        self._remember(tail)

    # -- retention -------------------------------------------------------------

    def purge_segments(self, names: Iterable[str]) -> list[str]:
        """Remove whole old segments, recording the removal in the chain first.

        The named segments must be the oldest ones (a prefix of the log) and
        must not include the newest. An ``audit.purge`` entry naming them and
        the last hash of the last one is appended (durably) before any file is
        deleted, so ``verify`` can tell a purge from a deletion.

        Raises:
            NotFoundError: a name is not a segment of this log.
            ConfigurationError: the names are not the oldest segments, or
                include the newest.
            AuditWriteError: the purge entry could not be written (nothing
                was deleted).
        """
        wanted = list(dict.fromkeys(names))
        if not wanted:
            return []
        with self._locked("purge segments of") as head_fd:
            tail = self._current(head_fd)
            segments = list_segments(self._folder)
            order = [s.name for s in segments]
            chosen = segments_to_purge(order, wanted, where=str(self._folder))
            last_entry = _last_entry(self._folder / chosen[-1])
            if last_entry is None:
                raise AuditWriteError(
                    f"segment {chosen[-1]} holds no readable entry, so its removal cannot be "
                    "recorded; run `governed-memory audit verify`"
                )
            self._write_entry(
                head_fd,
                tail,
                AuditEvent.AUDIT_PURGE,
                {
                    "segments": chosen,
                    "last_segment": chosen[-1],
                    "last_seq": last_entry.seq,
                    "last_hash": last_entry.hash,
                },
                self._clock.now(),
            )
            self._flush(tail)
            self._write_head(head_fd, tail)
            for name in chosen:
                (self._folder / name).unlink(missing_ok=True)
            fsync_dir(self._folder)
            return chosen

    def expired_segments(
        self,
        *,
        now: _dt.datetime,
        max_age: _dt.timedelta | None,
        min_age: _dt.timedelta = _dt.timedelta(0),
    ) -> list[str]:
        """The oldest segments whose newest entry is older than ``max_age`` (and ``min_age``).

        None for ``max_age`` (``forever``) keeps everything. The newest segment
        is never listed. Strictly older: an entry of exactly the age is kept.
        """
        if max_age is None:
            return []
        cutoff = now.astimezone(_dt.UTC) - max(max_age, min_age)
        segments = list_segments(self._folder)[:-1]
        expired = []
        for segment in segments:
            last = segment.last_entry()
            if last is None or last.time >= cutoff:
                break
            expired.append(segment.name)
        return expired

    def purge_expired(
        self,
        *,
        now: _dt.datetime | None = None,
        max_age: _dt.timedelta | None,
        min_age: _dt.timedelta = _dt.timedelta(0),
    ) -> list[str]:
        """Purge the segments :meth:`expired_segments` lists; return their names."""
        when = now if now is not None else self._clock.now()
        return self.purge_segments(
            self.expired_segments(now=when, max_age=max_age, min_age=min_age)
        )

    # -- reading ---------------------------------------------------------------

    def segments(self) -> list[SegmentInfo]:
        """The segment files, oldest first."""
        return list_segments(self._folder)

    def segment_ids(self) -> list[str]:
        """The ids (file names) of the segments, oldest first."""
        return [s.name for s in list_segments(self._folder)]

    def segment_entries(self, segment_id: str) -> list[AuditEntry]:
        """The readable entries of one segment, in order (no verification).

        Raises:
            NotFoundError: ``segment_id`` is not a segment of this log.
        """
        ids = self.segment_ids()
        if segment_id not in ids:
            raise NotFoundError(
                f"{segment_id!r} is not a segment of the audit log in {self._folder}; "
                f"its segments are {ids}"
            )
        try:
            lines, _ = read_segment_lines(self._folder / segment_id)
        except FileNotFoundError:
            return []  # purged meanwhile
        found = []
        for line in lines:
            with contextlib.suppress(EntryFormatError):
                found.append(parse_entry(line))
        return found

    def entries(self) -> Iterator[AuditEntry]:
        """Every readable entry, oldest first (no verification: use :func:`verify_log`)."""
        return iter_entries(self._folder)

    def tail(self, n: int) -> list[AuditEntry]:
        """The newest ``n`` readable entries, oldest first."""
        return tail_entries(self._folder, n)

    def head(self) -> Head | None:
        """The head as recorded (None when the log is empty)."""
        try:
            return parse_head(self.head_path.read_bytes())
        except FileNotFoundError:
            return None

    # -- lifecycle ---------------------------------------------------------------

    def _drop(self) -> None:
        self._forget_tail()
        for fd in (self._head_fd, self._hint_fd):
            if fd is not None:
                with contextlib.suppress(OSError):
                    os.close(fd)
        self._head_fd, self._head_ident, self._hint_fd = None, None, None

    def close(self) -> None:
        """Release file descriptors (reopened on the next use)."""
        with self._mutex:
            self._drop()

    def __del__(self) -> None:
        with contextlib.suppress(Exception):
            self._drop()

    def __repr__(self) -> str:
        return f"AuditLog(folder={str(self._folder)!r}, key_id={self._key.key_id!r})"


def rekey_endorsement(old_key: AuditKey, seq: int, prev: str, new_key_id: str) -> str:
    """The old key's MAC over a key change: the ``audit.rekey`` entry at ``seq`` after ``prev``.

    Binds the change to its place in the chain, so an endorsement cannot be
    copied to another log or another position.
    """
    body = canonical({"seq": seq, "prev": prev, "old": old_key.key_id, "new": new_key_id})
    return old_key.mac(b"rekey\x00" + body)


def iter_entries(folder: Path) -> Iterator[AuditEntry]:
    """Every readable entry in ``folder``, oldest first, without verifying (no key needed)."""
    for segment in list_segments(folder):
        try:
            lines, _ = read_segment_lines(segment.path)
        except FileNotFoundError:
            continue
        for line in lines:
            with contextlib.suppress(EntryFormatError):
                yield parse_entry(line)


def tail_entries(folder: Path, n: int) -> list[AuditEntry]:
    """The newest ``n`` readable entries in ``folder``, oldest first."""
    if n <= 0:
        return []
    return list(deque(iter_entries(folder), maxlen=n))


def _line_number(fd: int, offset: int) -> int:
    """1-based number of the line starting at ``offset``."""
    count, pos = 0, 0
    while pos < offset:
        chunk = os.pread(fd, min(_CHUNK, offset - pos), pos)
        if not chunk:
            break
        count += chunk.count(b"\n")
        pos += len(chunk)
    return count + 1


def _last_entry(path: Path) -> AuditEntry | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    try:
        for _offset, line, _terminated in reverse_lines(fd, os.fstat(fd).st_size):
            try:
                return parse_entry(line)
            except EntryFormatError:
                continue
        return None
    finally:
        os.close(fd)


if TYPE_CHECKING:
    _conforms: type[AuditStorage] = AuditLog  # the file backend of the audit storage seam


def segments_to_purge(order: list[str], wanted: list[str], *, where: str) -> list[str]:
    """The oldest segments up to the last of ``wanted``, refused unless they are exactly ``wanted``.

    ``order`` is the log's segments, oldest first. Shared by every audit storage.

    Raises:
        NotFoundError: a name is not a segment of the log.
        ConfigurationError: the newest segment is named, or older ones would be left before a gap.
    """
    unknown = [n for n in wanted if n not in order]
    if unknown:
        raise NotFoundError(
            f"{unknown} are not segments of the audit log in {where}; its segments are {order}"
        )
    if order[-1] in wanted:
        raise ConfigurationError(
            f"segment {order[-1]} is the newest and holds the head of the chain; it is "
            "never purged. Purge older segments only"
        )
    chosen = order[: max(order.index(n) for n in wanted) + 1]
    skipped = [n for n in chosen if n not in wanted]
    if skipped:
        raise ConfigurationError(
            f"purging {wanted} would leave older segments {skipped} before a gap; purge "
            "segments oldest first (include those too)"
        )
    return chosen
