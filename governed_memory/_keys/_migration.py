"""Turning a plaintext workspace into an encrypted one, and back.

``encrypt_workspace`` encrypts every agent's ``MEMORY.md`` and
``archive/history_*.md`` (ours, or the reference's) into ``MEMORY.md.gmenc``
and ``archive/history_*.gmenc``, and seals the governance records (consent,
holds, erasure records: see ``_reseal``); ``decrypt_workspace`` reverses it. Per file,
under the agent's lock: write the new form atomically, read it back and
compare it with the source, and only then remove the source. Both are
idempotent and crash-safe: after a crash, running them again finishes the job
(a target that already holds exactly the source's text is accepted; one that
differs stops the run, naming both files, and nothing is removed).

Removing a plaintext file unlinks it; the filesystem may keep its blocks
until they are reused (see SECURITY.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .._base import (
    GOVERNANCE_DIR,
    MEMORY_FILE,
    TMP_PREFIX,
    atomic_write,
    fsync_dir,
    remove_stale_temps,
)
from .._crypto import KIND_ARCHIVE, KIND_MEMORY, Keyring
from .._errors import GovernedMemoryError, StorageError
from .._stores import ENCRYPTED_MEMORY, ENCRYPTED_SUFFIX, EncryptedAgentStore
from ._rotation import Progress, agent_folders, no_progress

__all__ = ["MigrationReport", "decrypt_workspace", "encrypt_workspace"]


@dataclass
class MigrationReport:
    """Files converted, and files whose conversion an earlier run had already finished."""

    direction: str
    agents: int = 0
    converted: int = 0
    already_done: int = 0
    files: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def _plain_archives(store: EncryptedAgentStore) -> list[Path]:
    try:
        names = os.listdir(store.archive_dir)
    except FileNotFoundError:
        return []
    return [
        store.archive_dir / n
        for n in sorted(names)
        if n.startswith("history_") and n.endswith(".md") and not n.startswith(TMP_PREFIX)
    ]


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise StorageError(
            f"{path} is not valid UTF-8 at byte {exc.start}; it was not written by "
            "governed_memory or the reference, or it is damaged. Nothing was converted"
        ) from exc


def _conflict(source: Path, target: Path) -> StorageError:
    return StorageError(
        f"both {source} and {target} exist and hold different text; the run stopped and "
        "removed nothing. Compare them, keep the right one and run the command again"
    )


def _encrypt_file(store: EncryptedAgentStore, source: Path, target: Path, kind: int) -> bool:
    """Encrypt ``source`` into ``target``, verify, remove ``source``. False when already done."""
    text = _read_text(source)
    done = False
    if target.exists():
        if _decrypted(store, target, kind) != text:
            raise _conflict(source, target)
        done = True
    else:
        atomic_write(target, store.codec.encode_text(kind, target.name, text))
        if _decrypted(store, target, kind) != text:  # never remove the only good copy
            target.unlink()
            raise StorageError(f"{target} did not read back as {source}; {source} was kept")
    source.unlink()
    fsync_dir(source.parent)
    return not done


def _decrypted(store: EncryptedAgentStore, path: Path, kind: int) -> str:
    if kind == KIND_ARCHIVE:
        return store.decode_archive(path).text(path)
    decoded = store.decode_memory()
    assert decoded is not None
    return decoded.text(path)


def _decrypt_file(store: EncryptedAgentStore, source: Path, target: Path, kind: int) -> bool:
    """Decrypt ``source`` into ``target``, verify, remove ``source``. False when already done."""
    text = _decrypted(store, source, kind)
    done = False
    if target.exists():
        if _read_text(target) != text:
            raise _conflict(source, target)
        done = True
    else:
        atomic_write(target, text.encode("utf-8"))
        if _read_text(target) != text:
            target.unlink()
            raise StorageError(f"{target} did not read back as {source}; {source} was kept")
    source.unlink()
    fsync_dir(source.parent)
    return not done


def _run(workspace: Path, keyring: Keyring, direction: str, progress: Progress) -> MigrationReport:
    report = MigrationReport(direction=direction)
    folders = agent_folders(workspace)
    try:
        for done, folder in enumerate(folders, 1):
            store = EncryptedAgentStore(folder / MEMORY_FILE, lambda: "", keyring=keyring)
            try:
                with store.lock():
                    # A crashed writer's temp file may hold plaintext.
                    remove_stale_temps(folder)
                    remove_stale_temps(store.archive_dir)
                    pairs = _pairs(store, direction)
                    for source, target, kind in pairs:
                        convert = _encrypt_file if direction == "encrypt" else _decrypt_file
                        if convert(store, source, target, kind):
                            report.converted += 1
                        else:
                            report.already_done += 1
                        report.files.append(str(target))
                    report.agents += 1 if pairs else 0
            finally:
                store.close()
            progress(direction, done, len(folders))
        resealed = _governance_records(workspace, keyring, direction)
        report.converted += len(resealed)
        report.files += [str(p) for p in resealed]
    except GovernedMemoryError as exc:
        keyring.observer.record(
            f"{direction}-workspace",
            agent=None,
            subject_id=None,
            outcome="error",
            error=type(exc).__name__,
            converted=report.converted,
        )
        raise
    keyring.observer.record(
        f"{direction}-workspace",
        agent=None,
        subject_id=None,
        outcome="ok",
        converted=report.converted,
        already_done=report.already_done,
    )
    return report


def _governance_records(workspace: Path, keyring: Keyring, direction: str) -> list[Path]:
    """Seal (encrypt) or unseal (decrypt) the consent, hold and erasure records."""
    from .._crypto import RecordSealing
    from ._reseal import seal_governance, unseal_governance

    folder = workspace / GOVERNANCE_DIR
    if direction == "encrypt":
        return seal_governance(folder, RecordSealing(keyring))
    return unseal_governance(folder, RecordSealing(keyring))


def _pairs(store: EncryptedAgentStore, direction: str) -> list[tuple[Path, Path, int]]:
    folder = store.folder
    pairs: list[tuple[Path, Path, int]] = []
    if direction == "encrypt":
        for path in _plain_archives(store):
            pairs.append(
                (path, path.with_name(path.name[: -len(".md")] + ENCRYPTED_SUFFIX), KIND_ARCHIVE)
            )
        if (folder / MEMORY_FILE).exists():
            pairs.append((folder / MEMORY_FILE, folder / ENCRYPTED_MEMORY, KIND_MEMORY))
    else:
        for path in store.archive_files():
            pairs.append(
                (path, path.with_name(path.name[: -len(ENCRYPTED_SUFFIX)] + ".md"), KIND_ARCHIVE)
            )
        if store.memory_path.exists():
            pairs.append((store.memory_path, folder / MEMORY_FILE, KIND_MEMORY))
    return pairs


def encrypt_workspace(
    workspace: Path, keyring: Keyring, *, progress: Progress = no_progress
) -> MigrationReport:
    """Encrypt every plaintext memory and archive of ``workspace`` (idempotent, crash-safe).

    Raises:
        StorageError: a source is not UTF-8, or a target exists with other text.
    """
    return _run(Path(workspace), keyring, "encrypt", progress)


def decrypt_workspace(
    workspace: Path, keyring: Keyring, *, progress: Progress = no_progress
) -> MigrationReport:
    """Decrypt every encrypted memory and archive of ``workspace`` back to plaintext files.

    Frames whose keys were shredded stay erased. Raises :class:`DecryptionError`
    (naming the file) on any damage, before anything is removed.
    """
    return _run(Path(workspace), keyring, "decrypt", progress)
