"""Key rotation: re-wrap every data key under a new master key, optionally re-encrypt the data.

Both steps are resumable: run them again after an interruption and they
continue where they stopped. Re-wrapping replaces one keyring file at a time
atomically, each checked by unwrapping it again under the new key before it
replaces the old. Re-encryption (``reencrypt=True``) runs in three phases:

1. record the plan in ``reencrypt.json`` and give every live data key a new
   generation (new data is written under it from then on);
2. under each agent's lock, re-encrypt every file of the agent and of its
   subject memories (each under its subject folder's lock too) that still has
   frames under an older generation (one atomic replace per file); then re-seal the
   governance records (consent, holds, erasure records) sealed under an older
   generation of their purpose key, under their registry's lock;
3. destroy the old generations and remove the plan.

A process appending meanwhile sees the keyring change with a ``stat`` under
its agent lock, so after phase 2 has passed an agent no old-generation frame
can appear there again, and phase 3 loses nothing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .._base import AGENTS_DIR, GOVERNANCE_DIR, MEMORY_FILE, atomic_write
from .._crypto import AGENT, FrameKey, Keyring, Plain, RecordSealing
from .._errors import ConfigurationError, GovernedMemoryError, StorageError
from .._stores import EncryptedAgentStore
from ._reseal import seal_governance

__all__ = [
    "Progress",
    "RotationReport",
    "agent_folders",
    "reencrypt",
    "rotate",
    "rotate_master_key",
]

from .._crypto import REENCRYPT_FILE

Progress = Callable[[str, int, int], None]
"""Called as ``(phase, done, total)`` while a long operation runs."""


def no_progress(phase: str, done: int, total: int) -> None:
    return None


@dataclass
class RotationReport:
    """What a rotation did (counts only, never key material)."""

    to_key_id: str
    rewrapped: int = 0
    already_current: int = 0
    shredded_entries: int = 0
    new_generations: int = 0
    files_reencrypted: int = 0
    frames_reencrypted: int = 0
    frames_dropped: int = 0
    generations_retired: int = 0
    from_key_ids: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def agent_folders(workspace: Path) -> list[Path]:
    """Agent folders of ``workspace``, by name (hidden entries skipped).

    A symbolic link with an agent's place is listed too: opening its store
    refuses it (``UnsafePathError``), which stops the run with its name,
    rather than leave that agent's files behind unconverted (a re-encryption
    then retires the old keys).
    """
    root = Path(workspace) / AGENTS_DIR
    try:
        return sorted(
            p
            for p in root.iterdir()
            if (p.is_symlink() or p.is_dir()) and not p.name.startswith(".")
        )
    except FileNotFoundError:
        return []


def rotate_master_key(keyring: Keyring, *, progress: Progress = no_progress) -> RotationReport:
    """Re-wrap the index key and every data key under ``keyring.provider``'s current key.

    The provider must still unwrap the old key (a :class:`KeyChain` of the
    new and the old provider). Keys already under the new key are skipped, so
    an interrupted rotation is resumed by running it again. Every entry is
    checked against its tag before it is re-wrapped and tagged again when
    stored; a keyring from before entry tags is tagged first.
    """
    provider = keyring.require_provider()
    report = RotationReport(to_key_id=provider.key_id)
    old: set[str] = set()
    with keyring.locked():
        keyring.authenticate_entries()  # a keyring from before entry tags: tag it first
        # Through the keyring's storage: a folder's keyring.json, or a database's row.
        meta = keyring.read_meta()
        record = meta["index_key"]
        fresh = keyring.rewrap_record(record, keyring.index_context(), keyring.meta_path)
        if fresh is None:
            report.already_current += 1
        else:
            old.add(record["wrapped_by"])
            meta["index_key"] = fresh
            keyring.write_meta(meta)
            report.rewrapped += 1
        entries = keyring.entries()
        for done, (path, entry) in enumerate(entries, 1):
            if not entry.keys:
                report.shredded_entries += 1
            changed = False
            for gen, wrapped in sorted(entry.keys.items()):
                fresh = keyring.rewrap_record(wrapped, keyring.key_context(entry, gen), path)
                if fresh is None:
                    report.already_current += 1
                    continue
                old.add(wrapped["wrapped_by"])
                entry.keys[gen] = fresh
                changed = True
                report.rewrapped += 1
            if changed:
                keyring.store_entry(entry)
            progress("rewrap", done, len(entries))
    report.from_key_ids = sorted(old)
    keyring.observer.record(
        "keys.rotate", agent=None, subject_id=None, outcome="ok", **report.as_dict()
    )
    return report


def _plan_path(keyring: Keyring) -> Path:
    return keyring.folder / REENCRYPT_FILE


def _folder_of(keyring: Keyring) -> Path | None:
    """The keyring's folder; None for a keyring kept in another storage (a database)."""
    try:
        return keyring.folder
    except StorageError:  # kept in a WrappedKeyStorage of a database
        return None


def refuse_reencrypt(where: str) -> ConfigurationError:
    """Why ``--reencrypt`` does not run on a database deployment, and what to do instead."""
    return ConfigurationError(
        f"keys rotate --reencrypt re-encrypts a file workspace only, and this deployment "
        f"keeps its keys in {where}; nothing was changed. Run `governed-memory keys rotate` without "
        "--reencrypt to re-wrap every data key under the new master key (the database keeps "
        "only wrapped keys), or for fresh data keys copy the deployment to files "
        "(`governed-memory migrate-storage --to files`), re-encrypt there and copy it back"
    )


def reencrypt(
    workspace: Path,
    keyring: Keyring,
    *,
    report: RotationReport | None = None,
    progress: Progress = no_progress,
) -> RotationReport:
    """Re-encrypt every encrypted file of ``workspace`` under fresh data keys (resumable)."""
    report = report or RotationReport(to_key_id=keyring.require_provider().key_id)
    plan = _plan_path(keyring)
    with keyring.locked():
        if plan.exists():
            targets: dict[str, int] = json.loads(plan.read_bytes())["targets"]
        else:
            targets = {
                entry.ref.hex(): entry.current + 1
                for _, entry in keyring.entries()
                if not entry.shredded
            }
            doc = {"format": 1, "started": keyring.clock.now().isoformat(), "targets": targets}
            atomic_write(plan, (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode())
        for _, entry in keyring.entries():
            target = targets.get(entry.ref.hex())
            if target is not None and not entry.shredded and entry.current < target:
                keyring.add_generation(entry)
                report.new_generations += 1
    folders = agent_folders(workspace)
    for done, folder in enumerate(folders, 1):
        _reencrypt_agent(folder, keyring, report)
        progress("reencrypt", done, len(folders))
    report.files_reencrypted += len(
        seal_governance(Path(workspace) / GOVERNANCE_DIR, RecordSealing(keyring), refresh=True)
    )
    with keyring.locked():
        for _, entry in keyring.entries():
            if entry.ref.hex() not in targets:
                continue
            retired = [gen for gen in entry.keys if gen < entry.current]
            if retired:
                for gen in retired:
                    del entry.keys[gen]
                keyring.store_entry(entry)
                report.generations_retired += len(retired)
        plan.unlink(missing_ok=True)
    keyring.forget()
    keyring.observer.record(
        "keys.reencrypt",
        agent=None,
        subject_id=None,
        outcome="ok",
        files=report.files_reencrypted,
        frames=report.frames_reencrypted,
        dropped=report.frames_dropped,
    )
    return report


def _reencrypt_agent(folder: Path, keyring: Keyring, report: RotationReport) -> None:
    """Re-encrypt the agent's own memory and archives, then each subject memory's.

    The agent's lock is held throughout, and each subject folder's lock while
    its files are replaced (the order every writer takes them in).
    """
    store = EncryptedAgentStore(folder / MEMORY_FILE, lambda: "", keyring=keyring)
    try:
        with store.lock():
            _reencrypt_store(store, keyring, report)
            for subject in store.subject_stores():
                try:
                    with subject.lock():
                        _reencrypt_store(subject, keyring, report)
                finally:
                    subject.close()
    finally:
        store.close()


def _reencrypt_store(store: EncryptedAgentStore, keyring: Keyring, report: RotationReport) -> None:
    """Re-encrypt every file of ``store`` with frames under an older generation (lock held)."""
    files = [store.memory_path] if store.has_file(store.memory_path) else []
    files += store.archive_files()
    if not files:
        return
    agent_gen = keyring.current(AGENT, store.agent).gen
    for path in files:
        own = path == store.memory_path
        decoded = store.decode_memory() if own else store.decode_archive(path)
        if decoded is None:
            continue
        current: dict[bytes, int] = {}
        stale = decoded.skipped > 0 or decoded.torn > 0
        frames: list[Plain] = []
        for plain in decoded.frames:
            key = plain.key
            subject_gen = 0
            if key.has_subject:
                if key.subject_ref not in current:
                    entry = keyring.entry(key.subject_ref)
                    current[key.subject_ref] = entry.current if entry else key.subject_gen
                subject_gen = current[key.subject_ref]
            fresh = FrameKey(agent_gen, key.subject_ref, subject_gen)
            stale = stale or fresh != key
            frames.append(Plain(plain.data, fresh))
        stale = stale or any(k.agent_gen != agent_gen for k in decoded.raw_keys)
        if not stale:
            continue
        store.replace_file(path, frames)
        report.files_reencrypted += 1
        report.frames_reencrypted += len(frames)
        report.frames_dropped += decoded.skipped


def rotate(
    workspace: Path | None,
    keyring: Keyring,
    *,
    reencrypt_data: bool = False,
    progress: Progress = no_progress,
) -> RotationReport:
    """Re-wrap every data key under the current master key; with ``reencrypt_data``, also
    re-encrypt all data under fresh data keys. Resumable; see the module docstring.

    ``workspace`` is None for a keyring kept in a database: its keys are
    re-wrapped, and a re-encryption is refused (:func:`refuse_reencrypt`)
    before anything changes.

    Raises:
        KeyUnavailableError: a key is wrapped under a master key the provider
            does not hold (give the old key).
        ConfigurationError: ``reencrypt_data`` without a workspace folder.
    """
    if _folder_of(keyring) is None or workspace is None:
        if reencrypt_data:
            raise refuse_reencrypt(repr(keyring.storage))
        return _rotated(keyring, progress)
    try:
        report = rotate_master_key(keyring, progress=progress)
        if reencrypt_data or _plan_path(keyring).exists():
            reencrypt(workspace, keyring, report=report, progress=progress)
    except GovernedMemoryError as exc:
        keyring.observer.record(
            "keys.rotate", agent=None, subject_id=None, outcome="error", error=type(exc).__name__
        )
        raise
    return report


def _rotated(keyring: Keyring, progress: Progress) -> RotationReport:
    """:func:`rotate_master_key`, its failure audited as :func:`rotate` does."""
    try:
        return rotate_master_key(keyring, progress=progress)
    except GovernedMemoryError as exc:
        keyring.observer.record(
            "keys.rotate", agent=None, subject_id=None, outcome="error", error=type(exc).__name__
        )
        raise
