"""The keyring: data keys, each stored only wrapped by the master key.

One data key per agent and one per data subject. A frame of an agent's memory
is encrypted under a key derived from the agent key and, for a record with a
subject, the subject key too: destroying either (crypto-shredding) makes the
frame unreadable wherever a copy of it lies. Layout of the keyring folder::

    keyring.json        workspace id + the index key (wrapped)
    keys/<ref>.json     one entry per agent or subject: its key generations (wrapped), tagged
    reencrypt.json      present while a re-encryption runs (resumable)

Every entry is authenticated: its ``tag`` is an HMAC of its contents under a
key derived from the index key (see ``_entry``), so an entry edited outside
governed_memory (into a shredded one, to empty an agent's memory) is refused
with an :class:`IntegrityError` and nothing is written over it. That entries
must carry a tag is itself bound to the master key: ``keyring.json`` then
has format 2 and its index key is wrapped under a context that says so, so
turning it back into format 1 makes the index key fail to unwrap (and a
release from before tags refuses format 2 instead of writing untagged
entries). A
keyring written before tags is read as it is (its entries untagged) and
migrated, every entry tagged and then the flag set, by the first change
this release makes to it or by a master-key rotation. Without a provider
(status reads) nothing can be checked.

``<ref>`` is an HMAC of the kind and name under the index key: subject ids
never appear on disk, yet every process finds the same entry. Entries are
created with an exclusive link (two processes never create two keys for one
subject) and changed with an atomic replace under the keyring's flock.
That layout is :class:`KeyringFolder`, the file backend of the keyring's
storage seam (:class:`~governed_memory._protocols.WrappedKeyStorage`); the
:class:`Keyring` does all its persistence through one, so a database backend
keeps the same wrapped bytes (never key material) in its tables.
Processes notice changes made by others with one ``stat`` per entry used
(one read of the entry on a storage other than the folder);
a read of many frames (a preload, a compaction) checks each entry once per
operation through a :class:`KeySnapshot`, not once per frame.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import os
import struct
import threading
import weakref
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from .._base import (
    Clock,
    FolderLock,
    SystemClock,
    atomic_write,
    ensure_private_dir,
    link_exclusive,
)
from .._errors import (
    DecryptionError,
    IntegrityError,
    KeyProviderError,
    KeyUnavailableError,
    StorageError,
)
from ._entry import KEYRING_FORMAT, Entry, Version, ident, load_json
from ._epoch import ChangeCounter
from ._frames import NO_SUBJECT, FrameKey
from ._observer import CryptoObserver, NullObserver
from ._providers import KEY_BYTES, KeyProvider, RandomSource, hkdf

if TYPE_CHECKING:
    from .._protocols import WrappedKeyStorage

__all__ = [
    "AGENT",
    "PURPOSE",
    "SUBJECT",
    "DataKey",
    "Entry",
    "KeySnapshot",
    "Keyring",
    "KeyringFolder",
]

AGENT = "agent"
SUBJECT = "subject"
PURPOSE = "purpose"  # a governance layer's records (see _sealed.py)
META_FILE = "keyring.json"
KEYS_DIR = "keys"
REF_BYTES = 16
_MAX_CACHED = 100_000  # refs remembered per process (names -> HMAC), bounded
_U32 = struct.Struct(">I")
EPOCH_FILE = "epoch"
META_FORMATS = (KEYRING_FORMAT, 2)  # keyring.json: 1 before entry tags, 2 with them
TAGGED_FORMAT = 2


@dataclass(frozen=True)
class DataKey:
    """One generation of an agent's or subject's data key."""

    ref: bytes
    gen: int
    key: bytes = field(repr=False)


@dataclass
class _Cached:
    ident: Version | bytes  # the file's identity, or the entry's bytes (other storages)
    entry: Entry | None
    keys: dict[int, bytes] = field(default_factory=dict)


class KeyringFolder:
    """The keyring's wrapped keys in its folder: the file backend of :class:`WrappedKeyStorage`.

    The layout :class:`Keyring` reads and writes (``keyring.json``,
    ``keys/<ref hex>.json``, ``epoch``), with the same operations: exclusive
    creation by ``link``, atomic replace, the ``flock`` on the folder itself,
    the shared-memory change counter. Bytes pass through unchanged. Do not
    hold its :meth:`locked` and a :class:`Keyring`'s on one folder in one
    thread: they are two descriptors, so the second would wait on the first.
    """

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self._counter = ChangeCounter(self.folder / EPOCH_FILE)
        self._lock = FolderLock(self.folder)

    def _entry(self, ref: bytes) -> Path:
        return self.folder / KEYS_DIR / f"{ref.hex()}.json"

    def read_meta(self) -> bytes | None:
        try:
            return (self.folder / META_FILE).read_bytes()
        except FileNotFoundError:
            return None

    def create_meta(self, data: bytes) -> bool:
        ensure_private_dir(self.folder / KEYS_DIR)
        try:
            link_exclusive(self.folder, data, [META_FILE])
        except FileExistsError:
            return False
        return True

    def write_meta(self, data: bytes) -> None:
        ensure_private_dir(self.folder)
        atomic_write(self.folder / META_FILE, data)

    def read_entry(self, ref: bytes) -> bytes | None:
        try:
            return self._entry(ref).read_bytes()
        except FileNotFoundError:
            return None

    def create_entry(self, ref: bytes, data: bytes) -> bool:
        ensure_private_dir(self.folder / KEYS_DIR)
        try:
            link_exclusive(self.folder / KEYS_DIR, data, [self._entry(ref).name])
        except FileExistsError:
            return False
        return True

    def write_entry(self, ref: bytes, data: bytes) -> None:
        ensure_private_dir(self.folder / KEYS_DIR)
        atomic_write(self._entry(ref), data)

    def list_refs(self) -> list[bytes]:
        try:
            names = sorted(os.listdir(self.folder / KEYS_DIR))
        except FileNotFoundError:
            return []
        refs = []
        for name in names:
            stem, dot, ext = name.partition(".")
            if dot and ext == "json":
                with suppress(ValueError):  # not an entry (a temporary file)
                    refs.append(bytes.fromhex(stem))
        return refs

    def counter(self) -> int:
        return self._counter.read()

    def bump_counter(self) -> None:
        self._counter.bump()

    @contextmanager
    def locked(self) -> Iterator[None]:
        """The keyring folder's exclusive lock, the one :meth:`Keyring.locked` takes."""
        ensure_private_dir(self.folder / KEYS_DIR)
        with self._lock.held():
            yield

    def _after_fork(self) -> None:
        # A parent thread may have held the counter's mapping lock at fork time.
        self._counter = ChangeCounter(self._counter.path)

    def __repr__(self) -> str:
        return f"KeyringFolder({str(self.folder)!r})"


class Keyring:
    """Data keys of one workspace, wrapped by a :class:`KeyProvider`.

    Args:
        folder: the keyring folder (default chosen by the caller:
            ``<workspace>/.governed_memory/keyring``). Keep it out of backups
            that must honour crypto-shredding (see SECURITY.md). May be None
            when ``storage`` is given.
        provider: wraps and unwraps; None allows only :meth:`status`-style
            reads of metadata.
        storage: where the wrapped keys are kept (a database backend's
            :class:`WrappedKeyStorage`); None: :class:`KeyringFolder` on
            ``folder``, the layout above byte for byte.
        clock: creation and shredding times.
        random: source of data keys and ids (pin it to freeze bytes in tests).
        observer: told about key creation, shredding and rotation (audit).

    Raises:
        ValueError: neither ``folder`` nor ``storage`` was given.
    """

    def __init__(
        self,
        folder: Path | None,
        provider: KeyProvider | None,
        *,
        storage: WrappedKeyStorage | None = None,
        clock: Clock | None = None,
        random: RandomSource = os.urandom,
        observer: CryptoObserver | None = None,
    ) -> None:
        if storage is None:
            if folder is None:
                raise ValueError(
                    "a Keyring needs its folder or a storage; pass the keyring folder "
                    "(<workspace>/.governed_memory/keyring) or storage="
                )
            storage = KeyringFolder(Path(folder))
        self._folder = Path(folder) if folder is not None else None
        self.storage: WrappedKeyStorage = storage
        self.provider = provider
        self.clock: Clock = clock or SystemClock()
        self.random = random
        self.observer: CryptoObserver = observer or NullObserver()
        self._mutex = threading.RLock()
        self._depth = 0
        self._workspace_id: bytes | None = None
        self._index_key: bytes | None = None
        self._tagged = False  # keyring.json was seen (its index key unwrapped) in format 2
        self._meta_raw: bytes | None = None  # the keyring.json the state above was read from
        self._tag_keys: dict[bytes, bytes] = {}  # index key -> the key entry tags are made with
        self._cache: dict[bytes, _Cached] = {}
        self._ciphers: dict[tuple[bytes, FrameKey], AESGCM] = {}
        self._refs: dict[tuple[str, str], bytes] = {}
        self._paths: dict[bytes, str] = {}
        # The file backend tells a changed entry by one stat of its file; any other
        # storage by reading the entry (see _refresh).
        self._files = storage.folder if isinstance(storage, KeyringFolder) else None
        self._keys_dir_str = os.fspath(self._files / KEYS_DIR) if self._files else ""
        self._where = self._files if self._files is not None else Path(repr(storage))
        self._counter = storage.counter  # bound once: epoch() is on every encrypted add's path
        _LIVE.add(self)

    def _after_fork(self) -> None:
        # A parent thread may have held a lock at fork time.
        self._mutex = threading.RLock()
        self._depth = 0
        if isinstance(self.storage, KeyringFolder):
            self.storage._after_fork()

    # -- storage and locking ------------------------------------------------

    @property
    def folder(self) -> Path:
        """The keyring folder; a keyring kept in another storage has none.

        Raises:
            StorageError: the keyring is kept in a storage other than a folder.
        """
        if self._folder is None:
            raise StorageError(
                f"the keyring kept in {self.storage!r} has no folder; this operation works on "
                "a keyring folder only (use the keyring's storage, or copy it to files first)"
            )
        return self._folder

    @property
    def keys_dir(self) -> Path:
        return self._where / KEYS_DIR

    def entry_path(self, ref: bytes) -> Path:
        """Where the entry of ``ref`` is kept (for a storage other than files: a name in errors)."""
        return self.keys_dir / f"{ref.hex()}.json"

    def _entry_file(self, ref: bytes) -> str:
        # A str, cached: pathlib costs as much as the stat on the add() path.
        path = self._paths.get(ref)
        if path is None:
            path = self._paths[ref] = os.path.join(self._keys_dir_str, f"{ref.hex()}.json")
        return path

    @contextmanager
    def locked(self) -> Iterator[None]:
        """The keyring's exclusive inter-process lock (re-entrant in one thread)."""
        with self._mutex:
            if self._depth:
                self._depth += 1
                try:
                    yield
                finally:
                    self._depth -= 1
                return
            with self.storage.locked():
                self._depth = 1
                try:
                    yield
                finally:
                    self._depth = 0

    def require_provider(self) -> KeyProvider:
        if self.provider is None:
            raise KeyProviderError(
                "this operation needs the master key; set GOVERNED_MEMORY_MASTER_KEY or "
                "GOVERNED_MEMORY_MASTER_KEY_FILE, or pass key_provider="
            )
        return self.provider

    # -- the keyring file ----------------------------------------------------

    @property
    def meta_path(self) -> Path:
        """Where ``keyring.json`` is kept (for a storage other than files: a name in errors)."""
        return self._where / META_FILE

    @property
    def exists(self) -> bool:
        return self.storage.read_meta() is not None

    def read_meta(self) -> dict[str, Any]:
        """``keyring.json`` as stored (format checked, not authenticated).

        Raises:
            FileNotFoundError: there is no keyring.
            IntegrityError: it is not a keyring file of a format this release reads.
        """
        raw = self.storage.read_meta()
        if raw is None:
            raise FileNotFoundError(self.meta_path)
        return load_json(raw, self.meta_path, META_FORMATS)

    def write_meta(self, doc: dict[str, Any]) -> None:
        """Replace ``keyring.json`` with ``doc`` (hold :meth:`locked`; re-wrapping)."""
        data = (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode("ascii")
        self.storage.write_meta(data)

    def _read_meta(self) -> dict[str, Any]:
        return self.read_meta()

    def _meta(self, *, create: bool = False) -> dict[str, Any]:
        try:
            return self._read_meta()
        except FileNotFoundError:
            if not create:
                raise KeyUnavailableError(
                    f"there is no keyring in {self._where}; point GOVERNED_MEMORY_KEYRING_DIR at "
                    "the keyring this workspace was encrypted with, or restore it from its backup"
                ) from None
        provider = self.require_provider()
        workspace_id = self.random(16)
        index_key = self.random(KEY_BYTES)
        doc = {
            "format": TAGGED_FORMAT,
            "workspace_id": workspace_id.hex(),
            "created": self.clock.now().isoformat(),
            "index_key": self._wrap(
                provider, index_key, self._index_context(workspace_id, tagged=True)
            ),
        }
        data = (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode("ascii")
        self.storage.create_meta(data)  # False: another process created it first: use theirs
        return self._read_meta()

    @property
    def workspace_id(self) -> bytes:
        """The random id every encrypted file of this workspace is bound to."""
        if self._workspace_id is None:
            try:
                self._workspace_id = bytes.fromhex(self._meta()["workspace_id"])
            except (KeyError, ValueError) as exc:
                raise IntegrityError(self.meta_path) from exc
        return self._workspace_id

    def _index(self) -> bytes:
        if self._index_key is None:
            path = self.meta_path
            raw = self.storage.read_meta()
            if raw is None:
                self._meta()  # raises the message naming the missing keyring
                raw = self.storage.read_meta()  # (created meanwhile by another process)
                if raw is None:
                    raise FileNotFoundError(path)
            meta = load_json(raw, path, META_FORMATS)
            tagged = meta["format"] == TAGGED_FORMAT
            ctx = self._index_context(self.workspace_id, tagged=tagged)
            self._index_key = self._unwrap(meta["index_key"], ctx, path)
            self._tagged = self._tagged or tagged
            self._meta_raw = raw
        return self._index_key

    def _tags_required(self) -> bool:
        """Whether every entry must carry a tag (once seen, for the life of this object).

        An untagged entry on a keyring last seen untagged re-reads ``keyring.json``:
        another process may have migrated it since. The flag is trusted only
        once the index key unwrapped under the context that includes it.
        """
        if self._tagged:
            return True
        raw = self.storage.read_meta()
        if raw is None:
            return False
        if raw != self._meta_raw:
            self._index_key = None
            self._index()
        return self._tagged

    def _tag_key(self) -> bytes:
        index_key = self._index()
        cached = self._tag_keys.get(index_key)
        if cached is None:
            info = b"governed-memory keyring entry tag v1\x00" + self.workspace_id
            cached = self._tag_keys[index_key] = hkdf(index_key, info)
        return cached

    def _load_entry(self, data: bytes, path: Path, ref: bytes, *, listing: bool = False) -> Entry:
        """The entry in ``data``, checked (its ref, and its tag when a provider can check it).

        ``listing``: a listing for status or rotation, which may run with a
        provider that cannot open the index key (it then checks the ref only;
        any use of a key still checks the tag).
        """
        entry = Entry.from_json(data, path)
        if self.provider is None:  # status reads: no key to check a tag with
            return entry.check(path, ref, None, required=False)
        try:
            tag_key = self._tag_key()
        except KeyUnavailableError:
            if not listing:
                raise
            return entry.check(path, ref, None, required=False)
        return entry.check(path, ref, tag_key, required=entry.tag is None and self._tags_required())

    def authenticate_entries(self) -> int:
        """Tag every entry and mark the keyring as tagged (a migration); the entries tagged.

        Runs under the keyring's lock; a no-op on a keyring already tagged.
        Interrupted, it is resumed by the next change (entries are tagged
        first, the flag set last, each file replaced atomically). Entries
        changed before this ran cannot be told from genuine ones.
        """
        provider = self.require_provider()
        with self.locked():
            if self._tags_required():
                return 0
            tag_key = self._tag_key()
            tagged = 0
            for _path, entry in self.entries():
                if entry.tag is None or entry.tag != entry.expected_tag(tag_key):
                    self.storage.write_entry(entry.ref, entry.to_json(tag_key))
                    tagged += 1
            path = self.meta_path
            meta = self.read_meta()
            index_key = self._index()
            context = self._index_context(self.workspace_id, tagged=True)
            record = self._wrap(provider, index_key, context)
            record["created"] = meta["index_key"].get("created", record["created"])
            check = provider.unwrap(
                record["wrapped_by"], base64.b64decode(record["wrapped"]), context
            )
            if check != index_key:  # never replace a key we could not read back
                raise DecryptionError(path)
            meta["index_key"], meta["format"] = record, TAGGED_FORMAT
            self.write_meta(meta)
            self._index_key, self._meta_raw = None, None
            self._index()
            self._cache.clear()
            self._bump_epoch()
        self.observer.record(
            "keys.authenticate", agent=None, subject_id=None, outcome="ok", entries=tagged
        )
        return tagged

    def ref(self, kind: str, name: str, *, create: bool = False) -> bytes:
        """The pseudonymous reference of an agent's or subject's key (an HMAC, not the name).

        ``create``: make the keyring first when the workspace has none yet
        (a writer about to store data under the reference).
        """
        ref = self._refs.get((kind, name))
        if ref is None:
            if create and self._index_key is None:
                self._meta(create=True)
            message = kind.encode("ascii") + b"\x00" + name.encode("utf-8", "surrogatepass")
            ref = hmac.new(self._index(), message, hashlib.sha256).digest()[:REF_BYTES]
            if len(self._refs) < _MAX_CACHED:
                self._refs[(kind, name)] = ref
        return ref

    # -- wrapping --------------------------------------------------------------

    @staticmethod
    def _index_context(workspace_id: bytes, *, tagged: bool = False) -> bytes:
        # With entry tags the context says so: removing "entry_tags" from keyring.json
        # makes the index key fail to unwrap instead of letting untagged entries in.
        context = b"governed-memory index key v1\x00" + workspace_id
        return context + b"\x00entry tags v1" if tagged else context

    def _key_context(self, kind: str, ref: bytes, gen: int) -> bytes:
        return (
            b"governed-memory data key v1\x00"
            + self.workspace_id
            + kind.encode("ascii")
            + b"\x00"
            + ref
            + _U32.pack(gen)
        )

    def _wrap(self, provider: KeyProvider, key: bytes, context: bytes) -> dict[str, str]:
        wrapped = provider.wrap(key, context)
        return {
            "wrapped_by": provider.key_id,
            "wrapped": base64.b64encode(wrapped).decode("ascii"),
            "created": self.clock.now().isoformat(),
        }

    def _unwrap(self, record: dict[str, str], context: bytes, path: Path) -> bytes:
        provider = self.require_provider()
        try:
            wrapped = base64.b64decode(record["wrapped"], validate=True)
            key = provider.unwrap(record["wrapped_by"], wrapped, context)
        except KeyUnavailableError as exc:
            raise KeyUnavailableError(f"{path}: {exc}", path) from None
        except DecryptionError:
            raise DecryptionError(path) from None
        except (KeyError, ValueError) as exc:
            raise IntegrityError(path) from exc
        if len(key) != KEY_BYTES:
            raise DecryptionError(path)
        return key

    # -- entries -----------------------------------------------------------------

    def entry(self, ref: bytes) -> Entry | None:
        """The entry of ``ref`` as it is on disk now (None when there is none)."""
        return self._refresh(ref).entry

    def _refresh(self, ref: bytes) -> _Cached:
        """Bring the cached entry of ``ref`` up to date: one ``stat`` (files), else one read."""
        with self._mutex:
            cached = self._cache.get(ref)
            data: bytes | None
            if self._files is not None:
                try:
                    version: Version | bytes = ident(os.stat(self._entry_file(ref)))
                except FileNotFoundError:
                    version = None
                if cached is not None and cached.ident == version:
                    return cached
                data = None if version is None else self.storage.read_entry(ref)
            else:
                data = self.storage.read_entry(ref)
                if cached is not None and cached.ident == data:
                    return cached
                version = data
            entry = None
            if data is not None:
                entry = self._load_entry(data, self.entry_path(ref), ref)
            keep = cached.keys if cached is not None else {}
            usable = set(entry.keys) if entry is not None else set()
            fresh = _Cached(version, entry, {g: k for g, k in keep.items() if g in usable})
            self._cache[ref] = fresh
            if cached is not None:
                self._ciphers = {
                    k: c for k, c in self._ciphers.items() if ref not in (k[0], k[1].subject_ref)
                }
            return fresh

    def _store_entry(self, entry: Entry) -> None:
        with self.locked():
            if not self._tags_required():
                self.authenticate_entries()  # the first change by this release migrates
            self.storage.write_entry(entry.ref, entry.to_json(self._tag_key()))
            self._cache.pop(entry.ref, None)
            self._bump_epoch()  # after the entry: a process that sees the bump sees the entry

    def _new_generation(self, entry: Entry, gen: int) -> None:
        key = self.random(KEY_BYTES)
        entry.keys[gen] = self._wrap(
            self.require_provider(), key, self._key_context(entry.kind, entry.ref, gen)
        )

    def current(self, kind: str, name: str) -> DataKey:
        """The data key new data of ``name`` is encrypted under; created when missing or shredded."""
        if self._index_key is None:
            self._meta(create=True)
        ref = self.ref(kind, name)
        created = False
        with self._mutex:
            cached = self._refresh(ref)
            if cached.entry is None:
                entry = Entry(kind, ref, None if kind == SUBJECT else name, current=1)
                self._new_generation(entry, 1)
                with self.locked():  # a migration must not miss an entry made meanwhile
                    if not self._tags_required():
                        self.authenticate_entries()
                    data = entry.to_json(self._tag_key())
                    created = self.storage.create_entry(ref, data)
                cached = self._refresh(ref)
            elif cached.entry.shredded:
                with self.locked():
                    again = self._refresh(ref).entry
                    if again is not None and again.shredded:
                        again.current += 1
                        self._new_generation(again, again.current)
                        self._store_entry(again)
                cached = self._refresh(ref)
            assert cached.entry is not None
            gen = cached.entry.current
            key = DataKey(ref, gen, self._key(ref, gen))
        if created:  # else another process won the race: its key is used
            # Recorded once the mutex is free: the audit append may wait (for the log's
            # lock, for other threads' batch), and every encryption in the process waits
            # on this mutex meanwhile.
            self._recorded("keys.create", kind, name, ref, generation=1)
        return key

    def _recorded(self, event: str, kind: str, name: str, ref: bytes, **attrs: Any) -> None:
        """Tell the observer (the audit trail) of ``event`` on the key of ``name``."""
        self.observer.record(
            event,
            agent=name if kind == AGENT else None,
            subject_id=name if kind == SUBJECT else None,
            outcome="ok",
            kind=kind,
            ref=ref.hex(),
            **attrs,
        )

    # -- the change counter ----------------------------------------------------

    def epoch(self) -> int:
        """The keyring's change counter (the storage's: :class:`ChangeCounter` for files)."""
        return self._counter()

    def _bump_epoch(self) -> None:
        self.storage.bump_counter()

    def _key(self, ref: bytes, gen: int) -> bytes:
        cached = self._cache[ref]
        key = cached.keys.get(gen)
        if key is None:
            assert cached.entry is not None
            ctx = self._key_context(cached.entry.kind, ref, gen)
            key = self._unwrap(cached.entry.keys[gen], ctx, self.entry_path(ref))
            cached.keys[gen] = key
        return key

    def key(self, ref: bytes, gen: int, *, refresh: bool = True) -> bytes | None:
        """Generation ``gen`` of the data key ``ref``; None when it was shredded.

        Raises:
            KeyUnavailableError: the keyring has no such key (another keyring
                folder, or one restored from a backup older than the data).
        """
        with self._mutex:
            cached = self._refresh(ref) if refresh or ref not in self._cache else self._cache[ref]
            entry = cached.entry
            if entry is not None and gen in entry.keys:
                return self._key(ref, gen)
            if entry is not None and 0 < gen <= entry.shredded_through:
                return None
            raise KeyUnavailableError(
                f"the keyring {self._where} holds no data key {ref.hex()} generation {gen}; "
                "point GOVERNED_MEMORY_KEYRING_DIR at the keyring this workspace was encrypted "
                "with (a keyring restored from a backup older than the data lacks newer keys)"
            )

    def frame_cipher(
        self, agent_ref: bytes, frame_key: FrameKey, checked: set[bytes] | None = None
    ) -> AESGCM | None:
        """The cipher of frames under ``frame_key``; None when one of its keys was shredded.

        ``checked`` holds refs already brought up to date during the current
        operation, so a read of many frames costs one ``stat`` per key.
        """
        for ref in (agent_ref, frame_key.subject_ref):
            if ref != NO_SUBJECT and (checked is None or ref not in checked):
                self._refresh(ref)
                if checked is not None:
                    checked.add(ref)
        with self._mutex:
            cipher = self._ciphers.get((agent_ref, frame_key))
            if cipher is not None:
                return cipher
            agent_key = self.key(agent_ref, frame_key.agent_gen, refresh=False)
            subject_key = b""
            if frame_key.has_subject:
                found = self.key(frame_key.subject_ref, frame_key.subject_gen, refresh=False)
                if found is None:
                    return None
                subject_key = found
            if agent_key is None:
                return None
            info = (
                b"governed-memory frame key v1\x00"
                + agent_ref
                + _U32.pack(frame_key.agent_gen)
                + frame_key.subject_ref
                + _U32.pack(frame_key.subject_gen)
            )
            cipher = AESGCM(hkdf(agent_key + subject_key, info))
            self._ciphers[(agent_ref, frame_key)] = cipher
            return cipher

    def snapshot(self) -> KeySnapshot:
        """The keyring as one operation (a preload, a compaction) sees it: see :class:`KeySnapshot`."""
        return KeySnapshot(self)

    def entries(self) -> list[tuple[Path, Entry]]:
        """Every stored entry, in ref (file-name) order, each with where it is kept."""
        found = []
        for ref in self.storage.list_refs():
            data = self.storage.read_entry(ref)
            if data is None:
                continue  # removed since the listing
            path = self.entry_path(ref)
            found.append((path, self._load_entry(data, path, ref, listing=True)))
        return found

    # -- shredding -----------------------------------------------------------------

    def shred(self, kind: str, name: str) -> list[int]:
        """Destroy every generation of ``name``'s data key; return the generations destroyed.

        The entry stays as a tombstone so readers skip the frames it covered
        instead of reporting a missing key. New data for ``name`` gets a new
        key. Copies of the keyring taken earlier still hold the wrapped key:
        see SECURITY.md.
        """
        if not self.exists:
            return []  # nothing was ever encrypted in this workspace
        ref = self.ref(kind, name)
        with self.locked():
            entry = self._refresh(ref).entry
            if entry is None:
                entry = Entry(kind, ref, None if kind == SUBJECT else name, current=0)
            destroyed = sorted(entry.keys)
            entry.keys = {}
            entry.shredded_through = entry.current
            entry.shredded_at = self.clock.now().isoformat()
            self._store_entry(entry)
            self._cache.pop(ref, None)
            self._ciphers = {
                k: c for k, c in self._ciphers.items() if ref not in (k[0], k[1].subject_ref)
            }
        self._recorded("keys.shred", kind, name, ref, generations=len(destroyed))
        return destroyed

    def shred_agent(self, agent: str) -> list[int]:
        """Crypto-shred an agent: every frame of its memory and archives becomes unreadable."""
        return self.shred(AGENT, agent)

    def shred_subject(self, subject_id: str) -> list[int]:
        """Crypto-shred a data subject: their records become unreadable in every agent."""
        return self.shred(SUBJECT, subject_id)

    # -- used by rotation -----------------------------------------------------------

    def rewrap_record(
        self, record: dict[str, str], context: bytes, path: Path
    ) -> dict[str, str] | None:
        """``record`` re-wrapped under the current master key (None when it already is)."""
        provider = self.require_provider()
        if record.get("wrapped_by") == provider.key_id:
            return None
        key = self._unwrap(record, context, path)
        fresh = self._wrap(provider, key, context)
        fresh["created"] = record.get("created", fresh["created"])
        check = provider.unwrap(fresh["wrapped_by"], base64.b64decode(fresh["wrapped"]), context)
        if check != key:  # never replace a key we could not read back
            raise DecryptionError(path)
        return fresh

    def key_context(self, entry: Entry, gen: int) -> bytes:
        return self._key_context(entry.kind, entry.ref, gen)

    def index_context(self) -> bytes:
        """The context the index key is wrapped under now (with entry tags once migrated)."""
        self._index()
        return self._index_context(self.workspace_id, tagged=self._tagged)

    def store_entry(self, entry: Entry) -> None:
        """Replace an entry on disk (hold :meth:`locked`)."""
        self._store_entry(entry)

    def add_generation(self, entry: Entry) -> int:
        """Give ``entry`` a fresh current generation (hold :meth:`locked`); return it."""
        entry.current += 1
        self._new_generation(entry, entry.current)
        self._store_entry(entry)
        return entry.current

    def forget(self) -> None:
        """Drop every cached key (the next use reads the keyring again)."""
        with self._mutex:
            self._cache.clear()
            self._ciphers.clear()
            self._index_key = None
            self._tagged, self._meta_raw = False, None  # read (and checked) again

    def __repr__(self) -> str:
        if self._folder is None:
            return f"Keyring(storage={self.storage!r}, provider={self.provider!r})"
        return f"Keyring({str(self._folder)!r}, provider={self.provider!r})"


class KeySnapshot:
    """The keyring as one operation sees it: each key entry brought up to date once, on first use.

    A read of many frames asks for a frame's cipher per frame; through a
    snapshot only the first use of an entry costs its ``stat`` (and a read
    when another process changed it), later uses none. Take a new snapshot
    per operation: a key rotated or shredded in any process before the
    operation began is seen by it, one changed while it runs by the next.
    Frames sealed meanwhile under a key just shredded are unreadable like
    every other copy of that key's data.
    """

    __slots__ = ("_checked", "_keyring")

    def __init__(self, keyring: Keyring) -> None:
        self._keyring = keyring
        self._checked: set[bytes] = set()

    def frame_cipher(self, agent_ref: bytes, frame_key: FrameKey) -> AESGCM | None:
        """:meth:`Keyring.frame_cipher`, its entries checked once per snapshot."""
        return self._keyring.frame_cipher(agent_ref, frame_key, self._checked)


_LIVE: weakref.WeakSet[Keyring] = weakref.WeakSet()


def _after_fork_in_child() -> None:
    for keyring in list(_LIVE):
        keyring._after_fork()


os.register_at_fork(after_in_child=_after_fork_in_child)


if TYPE_CHECKING:
    _conforms: type[WrappedKeyStorage] = KeyringFolder  # the file backend of the keyring seam
