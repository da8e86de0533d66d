"""The encrypted agent-folder store: the same text as the plaintext store, as framed ciphertext.

``MEMORY.md.gmenc`` is an append-only log of authenticated frames (one per
add, never rewritten by an add) and ``archive/history_<ts>.gmenc`` holds
sealed archives, named exactly as the plaintext store names them but for the
suffix. What :meth:`append`, :meth:`compact` and :meth:`rewrite` were given is
what :meth:`read_memory` and :meth:`read_archive` return. No plaintext touches
the disk: temporary files hold ciphertext only.

Crash safety: an append is one ``write`` of whole frames. A crash can only
cut the last frame short; readers drop such a torn tail and the next append
truncates it away under the folder lock. Damage anywhere else, a wrong key or
a file from elsewhere raises :class:`DecryptionError` naming the file, which
is never overwritten. Locking is the plaintext store's (:mod:`._folder_lock`),
and so is the check that the open memory file is still the one at the path
(inotify through :mod:`._watch`, ``stat`` without it): see :meth:`append_utf8`.
"""

from __future__ import annotations

import datetime as _dt
import fcntl
import os
import termios
from collections.abc import Callable, Iterator
from contextlib import suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .._base import (
    ARCHIVE_DIR,
    MEMORY_FILE,
    Clock,
    GroupSync,
    SystemClock,
    atomic_write_at,
    exists_at,
    link_exclusive_at,
    open_dir_at,
    open_file_at,
    open_read_at,
    write_all,
)
from .._crypto import (
    CHUNK,
    KIND_ARCHIVE,
    KIND_MEMORY,
    MAX_PLAINTEXT,
    NONCE_BYTES,
    SUBJECT,
    AgentCodec,
    Decoded,
    FrameContext,
    FrameStream,
    Keyring,
    KeySnapshot,
    Plain,
    RandomSource,
    fd_reader,
    frame_head,
    lone_subject,
    pack_position,
    scan,
    split_segments,
)
from .._errors import ConfigurationError, GovernedMemoryError, IntegrityError, StorageError
from .._format import HEADER_MARKER, META_OPEN, has_records
from ._base import StoreFactory
from ._files import AgentFolderStore
from ._plaintext import archive_names
from ._watch import Armed, arm, disarm

__all__ = [
    "ENCRYPTED_SUFFIX",
    "EncryptedAgentStore",
    "encrypted_archive_names",
    "encrypted_memory_name",
    "encrypted_store_factory",
]

ENCRYPTED_SUFFIX = ".gmenc"
ENCRYPTED_MEMORY = MEMORY_FILE + ENCRYPTED_SUFFIX

_flock = fcntl.flock
_ioctl = fcntl.ioctl
_lseek = os.lseek
_LOCK_EX = fcntl.LOCK_EX
_LOCK_UN = fcntl.LOCK_UN
_SEEK_END = os.SEEK_END
_FIONREAD = termios.FIONREAD
_NOTHING = bytes(4)  # FIONREAD's answer when no event is pending
_pack = pack_position
_write = os.write
_HEADS_KEPT = 1024  # frame heads remembered per store (one per distinct message size)
_META_MARK = META_OPEN.encode()  # bytes without it name no subject
_SUBJECTS_KEPT = 64  # subjects whose fast-path keys a store remembers


def encrypted_memory_name() -> str:
    """``MEMORY.md.gmenc``: encrypted files do not pretend to be markdown."""
    return ENCRYPTED_MEMORY


def encrypted_archive_names(when: _dt.datetime) -> Iterator[str]:
    """The plaintext store's collision-free archive names with ``.gmenc`` for ``.md``."""
    for name in archive_names(when):
        yield name.removesuffix(".md") + ENCRYPTED_SUFFIX


@dataclass
class _Tail:
    """Where the next frame of the open MEMORY.md.gmenc goes."""

    ident: tuple[int, int]
    end: int
    count: int
    context: FrameContext


class EncryptedAgentStore(AgentFolderStore):
    """An agent folder whose memory and archives are encrypted (see the module docstring).

    Args:
        memory_path: the agent's MEMORY.md path (as the plaintext store gets
            it) or its ``MEMORY.md.gmenc``; the agent name is the folder's.
        header: builds the text header of a new memory (called under the lock).
        keyring: the workspace's keyring (data keys and the master key provider).
        clock: names archives.
        random: nonces and file ids (pin it to freeze bytes in tests).
        fsync_appends: make every append durable before it returns (the
            policy's ``durability.sync = "commit"``; default off, as in the
            plaintext store: an acknowledged add survives a process crash,
            not a power cut; compactions always fsync).
        syncer: shares the appends' ``fdatasync`` with the other writers of
            the file in this process (group commit; default: this store's own).
    """

    def __init__(
        self,
        memory_path: Path,
        header: Callable[[], str],
        *,
        keyring: Keyring,
        clock: Clock | None = None,
        random: RandomSource = os.urandom,
        fsync_appends: bool = False,
        syncer: GroupSync | None = None,
        partition: str | None = None,
    ) -> None:
        path = Path(memory_path)
        self._folder = path.parent
        self._set_partition(partition)
        self._memory_path = self._folder / ENCRYPTED_MEMORY
        self._plain_path = self._folder / MEMORY_FILE
        self._header = header
        self._clock: Clock = clock or SystemClock()
        self._random = random
        self._fsync_appends = fsync_appends
        self._syncer = syncer if syncer is not None else GroupSync()
        self.keyring = keyring
        self.codec = AgentCodec(keyring, self.agent, random=random)
        self._lock = self._folder_lock()
        self._fd: int | None = None
        self._tail: _Tail | None = None
        self._seen: _Tail | None = None  # learnt by the last read, reused by the next append
        self._folder_str = os.fspath(self._folder)
        # Set by a full check (see _arm) for the fast one, as in the plaintext
        # store: the folder and file descriptors, the inotify descriptor, a
        # buffer for its FIONREAD, the watcher and this file's watch.
        self._armed: Armed | None = None
        self._arm_failed = False  # for the open file: do not retry on every append
        # The fast path's keys by subject (None: the agent's own): (keyring
        # change counter when they were current, cipher, packed key bytes);
        # the frame heads by sealed size (a conversation's blocks have few
        # sizes); the subjects of metadata lines seen (see lone_subject).
        self._keys: dict[str | None, tuple[int, AESGCM, bytes]] = {}
        self._heads: dict[int, bytes] = {}
        self._subjects: dict[bytes, str | None] = {}

    suffix = ENCRYPTED_SUFFIX

    def partition_name(self, subject_id: str) -> str:
        """The keyring's keyed reference of ``subject_id`` (the name of its key entry), in hex.

        An HMAC under the workspace's index key: the folder name says nothing
        about who the subject is to anyone without the master key, and it
        survives master-key rotation (the index key is only re-wrapped).
        """
        return self.keyring.ref(SUBJECT, subject_id, create=True).hex()

    def _open_partition(self, partition: str) -> EncryptedAgentStore:
        return EncryptedAgentStore(
            self._partition_path(partition),
            self._header,
            keyring=self.keyring,
            clock=self._clock,
            random=self._random,
            fsync_appends=self._fsync_appends,
            syncer=self._syncer,
            partition=partition,
        )

    def _dirfd(self) -> int:
        """The locked folder's descriptor (lock held)."""
        dirfd = self._lock.dirfd
        assert dirfd is not None
        return dirfd

    def _refuse_plaintext(self) -> None:
        # Also when both exist (a migration that stopped half-way, or a
        # plaintext-mode process run after it): never silently ignore memory.
        # Lock held; a link named MEMORY.md is refused (UnsafePathError).
        if exists_at(self._dirfd(), MEMORY_FILE, self._plain_path):
            raise ConfigurationError(
                f"{self._plain_path} is plaintext but the policy enables encryption; run "
                "`governed-memory encrypt-workspace` to encrypt the workspace (or disable "
                "encryption in the policy)"
            )

    # -- the active memory ---------------------------------------------

    def _fresh_memory(self) -> bytes:
        return self.codec.encode_text(KIND_MEMORY, ENCRYPTED_MEMORY, self._header())

    def _create_memory(self, *, replace: bool = False) -> None:
        self._refuse_plaintext()
        self._close_file()
        dirfd = self._dirfd()
        if replace:
            atomic_write_at(dirfd, ENCRYPTED_MEMORY, self._fresh_memory())
            return
        # Claimed with link(): never replaces a memory another writer created.
        with suppress(FileExistsError):
            link_exclusive_at(dirfd, self._fresh_memory(), [ENCRYPTED_MEMORY], self._folder)

    def _tail_for_append(self) -> tuple[int, _Tail]:
        """The append descriptor and position of the current memory file (lock held)."""
        dirfd = self._dirfd()
        try:
            st = os.stat(ENCRYPTED_MEMORY, dir_fd=dirfd, follow_symlinks=False)
        except FileNotFoundError:
            self._create_memory()
            st = os.stat(ENCRYPTED_MEMORY, dir_fd=dirfd, follow_symlinks=False)
        tail = self._tail
        if (
            self._fd is None
            or tail is None
            or tail.ident != (st.st_dev, st.st_ino)
            or st.st_size < tail.end  # truncated behind our back: learn the file again
        ):
            tail = self._open_tail()
            assert self._fd is not None
            st = os.fstat(self._fd)
        if st.st_size != tail.end:
            self._catch_up(tail, st.st_size)
        assert self._fd is not None
        return self._fd, tail

    def _open_tail(self) -> _Tail:
        """Open MEMORY.md.gmenc for appending and learn where its frames end."""
        self._close_file()
        seen, self._seen = self._seen, None
        flags = os.O_RDWR | os.O_APPEND
        fd = self._fd = open_file_at(self._dirfd(), ENCRYPTED_MEMORY, flags, self._memory_path)
        fst = os.fstat(fd)
        ident = (fst.st_dev, fst.st_ino)
        if seen is not None and seen.ident == ident and fst.st_size >= seen.end:
            self._tail = _Tail(ident, seen.end, seen.count, seen.context)
            return self._tail
        opened = self.codec.open_for_append(_read_all(fd), self._memory_path, ENCRYPTED_MEMORY)
        if opened is None:
            # The agent's key was crypto-shredded: the file is erased data. Start afresh.
            self._create_memory(replace=True)
            return self._open_tail()
        context, end, count = opened
        self._tail = _Tail(ident, end, count, context)
        return self._tail

    def _catch_up(self, tail: _Tail, size: int) -> None:
        """Count frames other processes appended; cut a torn final frame away."""
        assert self._fd is not None
        data = os.pread(self._fd, size - tail.end, tail.end)
        found = scan(data, self._memory_path, offset=0, index=tail.count)
        tail.end += found.end
        tail.count += len(found.frames)
        if found.torn:
            os.ftruncate(self._fd, tail.end)
            self.keyring.observer.record(
                "recover",
                agent=self.agent,
                subject_id=None,
                outcome="ok",
                file=str(self._memory_path),
                dropped_bytes=found.torn,
            )

    def ensure(self) -> None:
        try:
            with self._lock.held():
                self._refuse_plaintext()
                if not exists_at(self._dirfd(), ENCRYPTED_MEMORY, self._memory_path):
                    self._create_memory()
        except GovernedMemoryError:
            raise
        except OSError as exc:
            raise StorageError(f"cannot create {self._memory_path}: {exc}") from exc

    def read_memory(self) -> str | None:
        try:
            with self._lock.held(fcntl.LOCK_SH, create=False) as dirfd:
                self._refuse_plaintext()
                try:
                    fd = open_read_at(dirfd, ENCRYPTED_MEMORY, self._memory_path)
                except FileNotFoundError:
                    return None
                try:
                    fst = os.fstat(fd)
                    # One pass in chunks (no whole copy of the ciphertext); the
                    # shared lock keeps appends out meanwhile.
                    text, stream = self.codec.read_text(
                        fd_reader(fd),
                        self._memory_path,
                        KIND_MEMORY,
                        ENCRYPTED_MEMORY,
                        torn_ok=True,
                    )
                finally:
                    os.close(fd)
                if not stream.first_shredded:
                    context = self.codec.context(stream.header, ENCRYPTED_MEMORY)
                    self._seen = _Tail((fst.st_dev, fst.st_ino), stream.end, stream.count, context)
                return text
        except GovernedMemoryError:
            raise
        except FileNotFoundError:
            return None  # no agent folder: nothing to read, and nothing created
        except OSError as exc:
            raise StorageError(f"cannot read {self._memory_path}: {exc}") from exc

    def append(self, block: str) -> None:
        if "\n### " in block and META_OPEN not in block:  # blocks without subjects: split
            self._append_split(block)
        elif block:
            self.append_utf8(block.encode("utf-8"))

    def _append_split(self, text: str) -> None:
        unsynced = self._append_pieces(
            [(piece.encode("utf-8"), subject) for piece, subject in split_segments(text)]
        )
        if unsynced is not None:
            self._settle(self._syncer, *unsynced)

    def append_utf8(self, data: bytes) -> None:
        """:meth:`append` for text already encoded as UTF-8 (as the plaintext store has it).

        Text without subject metadata (``Conversation.add``'s default-mode
        block) is one frame under the agent key, as :meth:`append` would
        write a single block; so is one block whose metadata names a subject
        (a governed ``add()``), under that subject's keys, found without
        parsing the block (:func:`~governed_memory._crypto.lone_subject`). Other text with metadata
        is split as :meth:`append` splits it, each block under its subject's
        keys.

        The hot path of ``Conversation.add``: once a full check has armed the
        watch (:meth:`_arm`), an append takes the folder lock, asks inotify
        with one ioctl whether the file or its folders were moved, replaced
        or removed, compares the keyring's change counter (a memory read)
        and the file's end with what this store knows, and writes one frame
        sealed under the remembered cipher with a fresh random nonce and the
        frame's full associated data. Anything unexpected (an event, a key
        change, another writer's frames, a torn tail) takes the full path.
        """
        subject: str | None = None
        if _META_MARK in data:  # a subject to find: its blocks go under their subject's key
            lone, subject = lone_subject(data, self._subjects)
            if not lone:
                self._append_split(data.decode("utf-8"))
                return
        if not data:
            return
        lock = self._lock
        mutex = lock.mutex
        mutex.acquire()  # not "with": measurably slower on this path
        unsynced = None
        try:
            armed = self._armed
            tail = self._tail
            if armed is not None and tail is not None and not lock.depth:
                dirfd, fd, ifd, pending, watcher, file_watch = armed
                _flock(dirfd, _LOCK_EX)
                try:
                    _ioctl(ifd, _FIONREAD, pending, True)
                    if pending != _NOTHING or watcher.draining:
                        watcher.drain()  # maybe another file's event: ours?
                    keys = self._keys.get(subject)
                    if (
                        not file_watch.stale
                        and keys is not None
                        and keys[0] == self.keyring.epoch()  # no key changed (e.g. shredded)
                        and _lseek(fd, 0, _SEEK_END) == tail.end  # no other writer since
                        and len(data) <= MAX_PLAINTEXT
                    ):
                        # seal_frame, inlined: a fresh random nonce, the
                        # frame's full associated data (file, agent, name,
                        # position, key bytes).
                        _, cipher, fixed = keys
                        nonce = self._random(NONCE_BYTES)
                        sealed = cipher.encrypt(
                            nonce, data, b"".join((tail.context.prefix, _pack(tail.count), fixed))
                        )
                        head = self._heads.get(len(sealed))
                        if head is None:
                            if len(self._heads) >= _HEADS_KEPT:
                                self._heads.clear()
                            head = self._heads[len(sealed)] = frame_head(len(sealed))
                        frame = b"".join((head, fixed, nonce, sealed))
                        written = _write(fd, frame)  # raises with nothing written, or writes
                        if written == len(frame):
                            tail.end += written
                            tail.count += 1
                        else:  # short write: finish it, or cut it away
                            self._write_frames(fd, tail, frame, 1, written=written)
                        if not self._fsync_appends:
                            return
                        unsynced = (os.dup(fd), tail.ident)  # settled below, unlocked
                finally:
                    _flock(dirfd, _LOCK_UN)
                if unsynced is None and file_watch.stale:  # changed: the full check, a new watch
                    self._disarm()
            if unsynced is None:
                unsynced = self._append_pieces([(data, subject)])
        except GovernedMemoryError:
            raise
        except OSError as exc:
            raise StorageError(f"cannot append to {self._memory_path}: {exc}") from exc
        finally:
            mutex.release()
        if unsynced is not None:  # fsync_appends: durable before returning, outside the lock
            self._settle(self._syncer, *unsynced)

    def _append_pieces(
        self, pieces: list[tuple[bytes, str | None]]
    ) -> tuple[int, tuple[int, int]] | None:
        """Append after the full check (stat, keyring, catch-up); arms the fast one.

        With ``fsync_appends`` returns a ``dup`` of the descriptor and the
        file's identity, for :meth:`_settle` once the lock is released.
        """
        try:
            with self._lock.mutex:
                self._lock.acquire(fcntl.LOCK_EX)
                try:
                    fd, tail = self._tail_for_append()
                    frame = self.codec.frame_utf8
                    data = b"".join(
                        [
                            frame(tail.context, tail.count + offset, piece, subject)
                            for offset, (piece, subject) in enumerate(pieces)
                        ]
                    )
                    self._write_frames(fd, tail, data, len(pieces))
                    if self._armed is None and not self._arm_failed:
                        self._arm(fd, tail)
                    if len(self._keys) >= _SUBJECTS_KEPT:
                        self._keys.clear()
                    for subject in {subject for _, subject in pieces}:
                        epoch, _, cipher, fixed = self.codec.current(subject)
                        self._keys[subject] = (epoch, cipher, fixed)
                    return (os.dup(fd), tail.ident) if self._fsync_appends else None
                finally:
                    self._lock.release()
        except GovernedMemoryError:
            raise
        except OSError as exc:
            raise StorageError(f"cannot append to {self._memory_path}: {exc}") from exc

    def _write_frames(
        self, fd: int, tail: _Tail, data: bytes, count: int, *, written: int = -1
    ) -> None:
        """Write whole frames at the tail (lock held); a failed write is cut away.

        ``written``: how much of ``data`` a write already wrote (the fast path's).
        """
        try:
            if written < 0:
                written = os.write(fd, data)
            if written != len(data):  # short write: finish it (or raise)
                write_all(fd, data[written:])
        except BaseException:
            # Cut a partly written frame now rather than at the next append.
            with suppress(OSError):
                os.ftruncate(fd, tail.end)
            self._tail = None
            self._disarm()
            raise
        tail.end += len(data)
        tail.count += count

    def _arm(self, fd: int, tail: _Tail) -> None:
        """Watch ``fd`` so later appends check it with one ioctl (lock held, ``fd`` just checked).

        With ``fsync_appends`` too: on a fast disk a shared ``fdatasync``
        costs less than the full check's stat, keyring and catch-up, and the
        fast path settles its write the same way (durable before it returns,
        outside the lock). Without inotify the full check stays.
        """
        dirfd = self._lock.dirfd
        assert dirfd is not None
        self._armed, self._arm_failed = arm(
            fd, dirfd, self._folder_str, ENCRYPTED_MEMORY, tail.ident, self._lock.current
        )

    def _disarm(self) -> None:
        disarm(self._armed)
        self._armed = None

    def compact(self, first_block: str | None) -> str | None:
        with self._compacting():
            archive = None
            self._refuse_plaintext()
            dirfd = self._dirfd()
            try:
                fd = open_read_at(dirfd, ENCRYPTED_MEMORY, self._memory_path)
            except FileNotFoundError:
                fd = None
            if fd is not None:
                try:
                    keys = self.keyring.snapshot()  # one check per key entry, not per frame
                    if self._has_records(fd, keys):
                        archive = self._write_archive(fd, keys)
                finally:
                    os.close(fd)
            fresh = self._header() + (first_block or "")
            encoded = self.codec.encode_text(KIND_MEMORY, ENCRYPTED_MEMORY, fresh)
            atomic_write_at(dirfd, ENCRYPTED_MEMORY, encoded)
            self._close_file()
            return None if archive is None else archive.removesuffix(self.suffix)

    def _memory_frames(self, fd: int, keys: KeySnapshot) -> FrameStream:
        return self.codec.stream(
            fd_reader(fd), self._memory_path, KIND_MEMORY, ENCRYPTED_MEMORY, torn_ok=True, keys=keys
        )

    def _has_records(self, fd: int, keys: KeySnapshot) -> bool:
        """Whether the memory's text holds a record (``has_records``), reading no more than needed.

        Its first frames decide once the text read so far holds the header's
        ``## Interaction Log`` line (where records may start is then known):
        a record header in them is one in the whole text. Otherwise, and to
        answer no, every frame is read and authenticated, as before.
        """
        text = ""
        for plaintext, _ in self._memory_frames(fd, keys):
            try:
                text += plaintext.decode("utf-8")
            except UnicodeDecodeError:
                raise IntegrityError(self._memory_path) from None
            if HEADER_MARKER in text and has_records(text):
                return True
        return has_records(text)

    def _write_archive(self, fd: int, keys: KeySnapshot) -> str:
        """Durably write the memory (open on ``fd``) as a sealed archive under the first free name.

        One pass per candidate name (the name is bound into the ciphertext):
        each frame is authenticated, decrypted and sealed again for the
        archive as the memory is read, and written in chunks of about a
        megabyte, so neither file is ever held whole. Damage anywhere raises
        before the archive gets its name; its temporary file is removed.
        Lock held.
        """
        archive = open_dir_at(self._dirfd(), ARCHIVE_DIR, self.archive_dir, create=True)
        try:
            for name in encrypted_archive_names(self._clock.now()):
                frames = self._memory_frames(fd, keys)
                data = _batched(self.codec.encode_stream(KIND_ARCHIVE, name, frames, keys=keys))
                try:
                    return link_exclusive_at(archive, data, [name], self.archive_dir)
                except FileExistsError:
                    continue
        finally:
            os.close(archive)
        raise FileExistsError(f"no free archive name left in {self.archive_dir}")

    # -- files ---------------------------------------------------------------

    def _encode(self, name: str | None, text: str) -> bytes:
        if name is None:
            return self.codec.encode_text(KIND_MEMORY, ENCRYPTED_MEMORY, text)
        return self.codec.encode_text(KIND_ARCHIVE, name, text)

    def _decode(self, data: bytes, path: Path) -> str:
        return self.codec.decode(data, path, KIND_ARCHIVE, path.name, torn_ok=False).text(path)

    def decode_archive(self, path: Path) -> Decoded:
        """An archive's frames, authenticated (for re-encryption and migration)."""
        target = Path(path)
        try:
            data = self.read_file(target)
        except GovernedMemoryError:
            raise
        except OSError as exc:
            raise StorageError(f"cannot read archive {target}: {exc}") from exc
        return self.codec.decode(data, target, KIND_ARCHIVE, target.name, torn_ok=False)

    def decode_memory(self) -> Decoded | None:
        """The memory's frames, authenticated (lock held by the caller)."""
        try:
            data = self.read_file(self._memory_path)
        except FileNotFoundError:
            return None
        return self.codec.decode(
            data, self._memory_path, KIND_MEMORY, ENCRYPTED_MEMORY, torn_ok=True
        )

    def replace_file(self, path: Path, frames: list[Plain]) -> None:
        """Re-encrypt ``frames`` into ``path`` (memory or archive) atomically (lock held)."""
        target = Path(path)
        kind = KIND_MEMORY if target == self._memory_path else KIND_ARCHIVE
        self._remove_own_temps()
        self.write_file(target, self.codec.encode_frames(kind, target.name, frames))
        if kind == KIND_MEMORY:
            self._close_file()

    # -- descriptors -------------------------------------------------------

    def _close_file(self) -> None:
        self._disarm()
        if self._fd is not None:
            os.close(self._fd)
        self._fd, self._tail, self._seen, self._arm_failed = None, None, None, False

    def close(self) -> None:
        with self._lock.mutex:
            self._close_file()
            if not self._lock.depth:
                self._lock.drop()

    def __del__(self) -> None:
        with suppress(Exception):
            self._close_file()
            self._lock.drop()

    def __repr__(self) -> str:
        return f"EncryptedAgentStore({str(self._memory_path)!r})"


def _batched(chunks: Iterator[bytes], size: int = CHUNK) -> Iterator[bytes]:
    """``chunks`` joined into pieces of about ``size`` bytes (one ``write`` each, not one per frame)."""
    batch: list[bytes] = []
    held = 0
    for chunk in chunks:
        batch.append(chunk)
        held += len(chunk)
        if held >= size:
            yield b"".join(batch)
            batch, held = [], 0
    if batch:
        yield b"".join(batch)


def _read_all(fd: int) -> bytes:
    """The whole file behind ``fd`` from its start."""
    size = os.fstat(fd).st_size
    chunks = [os.pread(fd, size, 0)] if size else []
    offset = len(chunks[0]) if chunks else 0
    while True:
        chunk = os.pread(fd, 1 << 20, offset)
        if not chunk:
            return b"".join(chunks) if len(chunks) != 1 else chunks[0]
        chunks.append(chunk)
        offset += len(chunk)


def encrypted_store_factory(
    keyring: Keyring,
    *,
    clock: Clock | None = None,
    random: RandomSource = os.urandom,
    fsync_appends: bool = False,
    syncer: GroupSync | None = None,
) -> StoreFactory:
    """A ``store_factory`` for :class:`Conversation` that builds encrypted stores.

    With ``fsync_appends`` the stores share one ``syncer`` (group commit).
    """
    shared = syncer if syncer is not None or not fsync_appends else GroupSync()

    def factory(memory_path: Path, header: Callable[[], str]) -> EncryptedAgentStore:
        return EncryptedAgentStore(
            memory_path,
            header,
            keyring=keyring,
            clock=clock,
            random=random,
            fsync_appends=fsync_appends,
            syncer=shared,
        )

    return factory


if TYPE_CHECKING:  # mypy checks that the class implements the storage seam's protocol
    from .._protocols import AgentStore

    _conforms: type[AgentStore] = EncryptedAgentStore
