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

Subject memories (``agents/<agent>/subjects/<p>/``, ``isolation = "subject"``)
are converted the same way, file by file under the subject folder's lock
(taken inside the agent's, the order every writer uses). The folder's name
differs by mode: plaintext names it by the unkeyed ``plain_partition_name(S)``,
encrypted by the keyring's keyed reference of S. So once a subject folder's
files are converted it is renamed (one atomic ``os.rename``) to the name the
new mode gives its subject, the ``subject`` of its records. A folder whose
records name no subject keeps its name; one whose records name two subjects
stops the run before anything in it changes. A crash before the rename
leaves converted files under the old name; the rerun finds nothing left to
convert there, reads the subject again and renames.

Removing a plaintext file unlinks it; the filesystem may keep its blocks
until they are reused (see SECURITY.md).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .._base import GOVERNANCE_DIR, MEMORY_FILE, open_beneath
from .._crypto import KIND_ARCHIVE, KIND_MEMORY, SUBJECT, Keyring
from .._errors import GovernedMemoryError, StorageError
from .._format import META_OPEN, parse_memory
from .._stores import (
    ENCRYPTED_MEMORY,
    ENCRYPTED_SUFFIX,
    SUBJECTS_DIR,
    EncryptedAgentStore,
    plain_partition_name,
)
from ._rotation import Progress, agent_folders, no_progress

__all__ = ["MigrationReport", "decrypt_workspace", "encrypt_workspace"]


@dataclass
class MigrationReport:
    """Files converted, and files whose conversion an earlier run had already finished."""

    direction: str
    agents: int = 0
    subjects: int = 0
    """Subject memories whose files were converted or whose folder was renamed."""
    renamed: int = 0
    """Subject folders renamed to the new mode's name."""
    converted: int = 0
    already_done: int = 0
    files: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


def _plain_archives(store: EncryptedAgentStore) -> list[Path]:
    return store.archive_files(".md")


def _read_text(store: EncryptedAgentStore, path: Path) -> str:
    """The text of a plaintext file of ``store`` (never read through a link)."""
    try:
        return store.read_file(path).decode("utf-8")
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
    text = _read_text(store, source)
    done = False
    if store.has_file(target):
        if _decrypted(store, target, kind) != text:
            raise _conflict(source, target)
        done = True
    else:
        store.write_file(target, store.codec.encode_text(kind, target.name, text))
        if _decrypted(store, target, kind) != text:  # never remove the only good copy
            store.remove_file(target)
            raise StorageError(f"{target} did not read back as {source}; {source} was kept")
    store.remove_file(source)
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
    if store.has_file(target):
        if _read_text(store, target) != text:
            raise _conflict(source, target)
        done = True
    else:
        store.write_file(target, text.encode("utf-8"))
        if _read_text(store, target) != text:
            store.remove_file(target)
            raise StorageError(f"{target} did not read back as {source}; {source} was kept")
    store.remove_file(source)
    return not done


def _run(workspace: Path, keyring: Keyring, direction: str, progress: Progress) -> MigrationReport:
    report = MigrationReport(direction=direction)
    folders = agent_folders(workspace)
    try:
        for done, folder in enumerate(folders, 1):
            store = EncryptedAgentStore(folder / MEMORY_FILE, lambda: "", keyring=keyring)
            try:
                with store.lock():
                    changed = _convert_store(store, direction, report)
                    for partition in _subject_folders(store):
                        if _convert_subject(store, partition, direction, report):
                            report.subjects += 1
                            changed = True
                    report.agents += 1 if changed else 0
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
        subject_memories=report.subjects,
        renamed=report.renamed,
    )
    return report


def _convert_store(store: EncryptedAgentStore, direction: str, report: MigrationReport) -> bool:
    """Convert the memory and archives of ``store`` (its lock held); whether it had any."""
    # A crashed writer's temp file may hold plaintext (the agent's store: its
    # subject folders' too, each under its lock).
    store.remove_temps()
    pairs = _pairs(store, direction)
    convert = _encrypt_file if direction == "encrypt" else _decrypt_file
    for source, target, kind in pairs:
        if convert(store, source, target, kind):
            report.converted += 1
        else:
            report.already_done += 1
        report.files.append(str(target))
    return bool(pairs)


def _subject_folders(store: EncryptedAgentStore) -> list[str]:
    """The names of the agent's subject folders (``subjects/<32 hex>/``), sorted.

    A symbolic link among them stops the run (``UnsafePathError``): skipping
    it would leave a subject's memory unconverted.
    """
    names = []
    for subject in store.subject_stores():
        names.append(str(subject.partition))
        subject.close()
    return names


def _convert_subject(
    agent: EncryptedAgentStore, partition: str, direction: str, report: MigrationReport
) -> bool:
    """Convert one subject memory, then give its folder the new mode's name (agent lock held).

    Whether anything changed (files converted, or the folder renamed).
    """
    folder = agent.folder / SUBJECTS_DIR / partition
    store = EncryptedAgentStore(
        folder / MEMORY_FILE, lambda: "", keyring=agent.keyring, partition=partition
    )
    try:
        with store.lock():
            subject = _subject_of(store)  # before converting: a refusal changes nothing
            converted = _convert_store(store, direction, report)
    finally:
        store.close()
    if subject is None:
        return converted
    wanted = (
        agent.keyring.ref(SUBJECT, subject, create=True).hex()
        if direction == "encrypt"
        else plain_partition_name(subject)
    )
    if wanted == partition:
        return converted
    _rename_folder(agent.folder, partition, wanted)
    report.renamed += 1
    return True


def _subject_of(store: EncryptedAgentStore) -> str | None:
    """The one subject the records of a subject folder name, in whichever form each file is.

    None when no record names one. Two subjects in one folder stop the run:
    the folder could carry only one of their names.
    """
    folder = store.folder
    texts: list[tuple[Path, str]] = []
    for path in _plain_archives(store):
        texts.append((path, _read_text(store, path)))
    if store.has_file(folder / MEMORY_FILE):
        texts.append((folder / MEMORY_FILE, _read_text(store, folder / MEMORY_FILE)))
    for path in store.archive_files():
        texts.append((path, _decrypted(store, path, KIND_ARCHIVE)))
    if store.has_file(store.memory_path):
        texts.append((store.memory_path, _decrypted(store, store.memory_path, KIND_MEMORY)))
    found: set[str] = set()
    for _path, text in texts:
        if META_OPEN in text:
            found.update(r.subject_id for r in parse_memory(text).records if r.subject_id)
    if len(found) > 1:
        raise StorageError(
            f"subject folder {folder} holds records of {len(found)} data subjects; a subject "
            "memory holds one subject's records, so it cannot be named for its subject. "
            "Nothing in it was converted. Move the other subjects' records out of its "
            "MEMORY.md (or erase them) and run the command again"
        )
    return next(iter(found), None)


def _rename_folder(agent_folder: Path, old: str, new: str) -> None:
    """Rename subject folder ``old`` to ``new`` atomically; refuse when ``new`` holds data.

    Relative to the descriptor of ``subjects/``, opened without following a
    link (nor is the agent folder followed).
    """
    source = agent_folder / SUBJECTS_DIR / old
    target = source.with_name(new)
    subjects = open_beneath(agent_folder.parent, [agent_folder.name, SUBJECTS_DIR])
    try:
        # Replaces an empty target folder, never a full one; a link is not a folder.
        os.rename(old, new, src_dir_fd=subjects, dst_dir_fd=subjects)
        os.fsync(subjects)
    except OSError as exc:
        raise StorageError(
            f"cannot rename subject folder {source} to {new}: {exc.strerror}. When "
            f"{target} exists, both hold memory of the same subject: move its files into "
            f"{source} (or remove the one you do not need) and run the command again"
        ) from exc
    finally:
        os.close(subjects)


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
        if store.has_file(folder / MEMORY_FILE):
            pairs.append((folder / MEMORY_FILE, folder / ENCRYPTED_MEMORY, KIND_MEMORY))
    else:
        for path in store.archive_files():
            pairs.append(
                (path, path.with_name(path.name[: -len(ENCRYPTED_SUFFIX)] + ".md"), KIND_ARCHIVE)
            )
        if store.has_file(store.memory_path):
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
