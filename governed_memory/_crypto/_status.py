"""What ``keys status`` shows: which master key wraps which data key (ids only)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ._keyring import Keyring, KeyringFolder

__all__ = ["KeyStatus", "KeyringStatus", "keyring_status"]

REENCRYPT_FILE = "reencrypt.json"


@dataclass(frozen=True)
class KeyStatus:
    """One agent's or subject's data key: generations and their wrapping master keys."""

    kind: str
    name: str
    ref: str
    current: int
    generations: list[int]
    wrapped_by: list[str]
    shredded_through: int
    shredded_at: str | None
    created: str | None = None
    """When the current generation was made (its age, for rotation reviews); None: not recorded."""

    @property
    def state(self) -> str:
        if not self.generations:
            return "shredded"
        if len(self.generations) > 1:
            return "re-encrypting"
        return "active"


@dataclass(frozen=True)
class KeyringStatus:
    """The keyring as ``keys status`` reports it. Never holds key material."""

    folder: str
    exists: bool
    workspace_id: str | None
    inside_workspace: bool
    master_key_id: str | None
    index_key_wrapped_by: str | None
    reencrypt_pending: bool
    keys: list[KeyStatus] = field(default_factory=list)

    @property
    def by_master_key(self) -> dict[str, int]:
        """How many wrapped keys each master key id wraps (the index key included)."""
        counts: dict[str, int] = {}
        if self.index_key_wrapped_by:
            counts[self.index_key_wrapped_by] = 1
        for key in self.keys:
            for key_id in key.wrapped_by:
                counts[key_id] = counts.get(key_id, 0) + 1
        return dict(sorted(counts.items()))

    def as_dict(self) -> dict[str, object]:
        data = asdict(self)
        data["by_master_key"] = self.by_master_key
        for row, key in zip(data["keys"], self.keys, strict=True):
            row["state"] = key.state
        return data


def keyring_status(keyring: Keyring, workspace: Path) -> KeyringStatus:
    """Read the keyring's metadata (needs no master key).

    A keyring kept in another storage than a folder (a database) is named by
    its storage, is never inside ``workspace`` and has no re-encryption plan.
    """
    files = keyring.storage.folder if isinstance(keyring.storage, KeyringFolder) else None
    where = str(files) if files is not None else repr(keyring.storage)
    inside = files is not None and files.resolve().is_relative_to(Path(workspace).resolve())
    provider = keyring.provider
    master = provider.key_id if provider is not None else None
    raw = keyring.storage.read_meta()
    if raw is None:
        return KeyringStatus(where, False, None, inside, master, None, False)
    meta = json.loads(raw)
    if not isinstance(meta, dict):  # checked before the entries, whose reads would say less
        raise ValueError(f"{keyring.meta_path} holds {type(meta).__name__}, not a JSON object")
    keys = []
    for _, entry in keyring.entries():
        name = (
            entry.label
            if entry.kind != "subject" and entry.label
            else f"{entry.kind}:{entry.ref.hex()[:12]}"
        )
        gens = sorted(entry.keys)
        keys.append(
            KeyStatus(
                kind=entry.kind,
                name=name,
                ref=entry.ref.hex(),
                current=entry.current,
                generations=gens,
                wrapped_by=[entry.keys[g]["wrapped_by"] for g in gens],
                shredded_through=entry.shredded_through,
                shredded_at=entry.shredded_at,
                created=entry.keys[entry.current].get("created")
                if entry.current in entry.keys
                else None,
            )
        )
    keys.sort(key=lambda k: (k.kind, k.name))
    return KeyringStatus(
        folder=where,
        exists=True,
        workspace_id=str(meta.get("workspace_id")),
        inside_workspace=inside,
        master_key_id=master,
        index_key_wrapped_by=meta.get("index_key", {}).get("wrapped_by"),
        reencrypt_pending=files is not None and (files / REENCRYPT_FILE).exists(),
        keys=keys,
    )
