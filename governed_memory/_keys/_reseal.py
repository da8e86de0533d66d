"""Sealing, unsealing and re-sealing the governance records of a workspace.

The registries (``_sealing``) write sealed records only while the policy
enables encryption. Three operations convert what is already on disk:

* ``encrypt-workspace`` seals the plaintext records written before
  encryption was enabled (:func:`seal_governance`);
* ``decrypt-workspace`` turns them back into their plaintext form, byte for
  byte as a plaintext registry writes it (:func:`unseal_governance`);
* ``keys rotate --reencrypt`` re-seals records under the new generation of
  their purpose key before the old generation is destroyed
  (:func:`seal_governance` with ``refresh=True``), so no record is lost with it.

Each file is converted under the lock its registry's writers take
(``consent.lock``, ``holds.lock``, ``requests.lock``, an unfinished erasure's
``.<id>.lock``),
checked in memory (every new record opens to the old plaintext) and then
replaced atomically (temp file, fsync, rename, folder fsync): a crash leaves
the old form or the new one, and running again finishes the job. A file
already in the wanted form is not rewritten. Scheduled erasures and finished
tombstones have no writer lock (they are written once); convert while no
purge or erasure runs, as the memory migration asks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .._base import TMP_PREFIX, FileLock, atomic_write, held_if_any
from .._crypto import (
    CONSENT_PURPOSE,
    ERASURE_PURPOSE,
    HOLDS_PURPOSE,
    REQUESTS_PURPOSE,
    RecordSealing,
    is_sealed,
)
from .._errors import StorageError
from .._records import (
    PROGRESS_SUFFIX,
    SCHEDULED_DIR,
    ConsentRegistry,
    HoldRegistry,
    RequestRegister,
    TombstoneStore,
)

__all__ = ["governance_files", "seal_governance", "unseal_governance"]


@dataclass(frozen=True)
class SealedFile:
    """One governance file and how its records are sealed."""

    path: Path
    purpose: str
    context: str  # its path inside the governance folder: the associated data
    lines: bool  # one record per line (else: the whole file is one record)
    lock: FileLock | None  # the lock its writers take (its registry's)


def governance_files(governance_dir: Path) -> list[SealedFile]:
    """The governance files present in ``governance_dir`` that hold sealable records."""
    folder = Path(governance_dir)

    def item(path: Path, purpose: str, lines: bool, lock: FileLock | None) -> SealedFile:
        return SealedFile(path, purpose, path.relative_to(folder).as_posix(), lines, lock)

    consent, holds, requests = (
        ConsentRegistry(folder),
        HoldRegistry(folder),
        RequestRegister(folder),
    )
    found = [
        item(consent.path, CONSENT_PURPOSE, True, consent.lock),
        item(holds.path, HOLDS_PURPOSE, False, holds.lock),
        item(requests.path, REQUESTS_PURPOSE, True, requests.lock),
    ]
    erasures = TombstoneStore(folder)
    tombstones = erasures.tombstone_dir
    names = _names(tombstones)
    for name in names:
        if name.endswith(PROGRESS_SUFFIX) and name.startswith("."):
            lock = erasures.lock(name[1 : -len(PROGRESS_SUFFIX)])
            found.append(item(tombstones / name, ERASURE_PURPOSE, True, lock))
        elif name.endswith(".json") and not name.startswith("."):
            stem = name[: -len(".json")]
            pending = f".{stem}{PROGRESS_SUFFIX}" in names  # finished ones are not written again
            writer = erasures.lock(stem) if pending else None
            found.append(item(tombstones / name, ERASURE_PURPOSE, False, writer))
    for name in _names(folder / SCHEDULED_DIR):
        if name.endswith(".json") and not name.startswith("."):
            found.append(item(folder / SCHEDULED_DIR / name, ERASURE_PURPOSE, False, None))
    return [f for f in found if f.path.is_file()]


def _names(folder: Path) -> list[str]:
    try:
        return sorted(n for n in os.listdir(folder) if not n.startswith(TMP_PREFIX))
    except (FileNotFoundError, NotADirectoryError):
        return []


def seal_governance(
    governance_dir: Path, sealing: RecordSealing, *, refresh: bool = False
) -> list[Path]:
    """Seal every plaintext governance record; return the files rewritten.

    With ``refresh``, records sealed under an older generation of their
    purpose key are sealed again under the current one.
    """
    return _convert_all(governance_dir, sealing, seal=True, refresh=refresh)


def unseal_governance(governance_dir: Path, sealing: RecordSealing) -> list[Path]:
    """Turn every sealed governance record back into plaintext; return the files rewritten."""
    return _convert_all(governance_dir, sealing, seal=False, refresh=False)


def _convert_all(
    governance_dir: Path, sealing: RecordSealing, *, seal: bool, refresh: bool
) -> list[Path]:
    changed = []
    for item in governance_files(governance_dir):
        with held_if_any(item.lock):  # None: a file written once, by no writer
            try:
                raw = item.path.read_bytes()
            except FileNotFoundError:
                continue  # removed meanwhile (a purge, an unscheduled erasure)
            converter = _Converter(item, sealing, seal=seal, refresh=refresh)
            new = converter.lines(raw) if item.lines else converter.record(raw, file=True)
            if new != raw:
                try:
                    atomic_write(item.path, new)
                except OSError as exc:
                    raise StorageError(
                        f"cannot rewrite {item.path}: {exc}; it keeps its previous form. Run "
                        "the command again to finish"
                    ) from exc
                changed.append(item.path)
    return changed


class _Converter:
    """Converts the records of one file, checking each result before it is used."""

    def __init__(
        self, item: SealedFile, sealing: RecordSealing, *, seal: bool, refresh: bool
    ) -> None:
        self.item = item
        self.sealing = sealing
        self.seal = seal
        self.current = sealing.current_generation(item.purpose) if seal and refresh else None

    def lines(self, raw: bytes) -> bytes:
        # A torn last line was never acknowledged: it is dropped, as a writer would.
        complete = raw[: raw.rfind(b"\n") + 1]
        out = [
            line if not line.strip() else self.record(line, file=False)
            for line in complete.split(b"\n")[:-1]
        ]
        return b"".join(line + b"\n" for line in out)

    def record(self, raw: bytes, *, file: bool) -> bytes:
        item, sealing = self.item, self.sealing
        sealed = is_sealed(raw)
        if sealed:
            stored = raw.strip()
            if self.seal and (
                self.current is None or sealing.generation(stored, item.path) == self.current
            ):
                return raw  # already in the wanted form
            plain = sealing.open(item.purpose, item.context, stored, item.path)
        else:
            plain = raw
            if not self.seal:
                return raw
        if not self.seal:
            return plain
        new = sealing.seal(item.purpose, item.context, plain)
        if sealing.open(item.purpose, item.context, new, item.path) != plain:
            raise StorageError(f"{item.path}: a sealed record did not read back; nothing changed")
        return new + b"\n" if file else new
