"""From settings to a keyring: which master key, which keyring folder.

The settings object reads the environment; this module only turns its values
into a :class:`KeyProvider` and a :class:`Keyring`. The master key comes from
exactly one of ``GOVERNED_MEMORY_MASTER_KEY`` (base64 of 32 bytes),
``GOVERNED_MEMORY_MASTER_KEY_FILE`` (a 0600 file) or a provider passed in
code; during a rotation the previous key (``..._OLD`` / ``..._OLD_FILE`` /
``--old-key-file``) is added for unwrapping only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import SecretStr

from .._base import GOVERNANCE_DIR, Clock, GroupSync
from .._crypto import CryptoObserver, KeyChain, KeyProvider, Keyring, LocalKeyProvider
from .._errors import ConfigurationError, KeyProviderError
from .._policy import Settings
from .._stores import ENCRYPTED_MEMORY, AgentStore, EncryptedAgentStore, PlaintextAgentStore

if TYPE_CHECKING:
    from .._protocols import DeploymentStorage

__all__ = [
    "KEYRING_DIR",
    "default_keyring_dir",
    "key_provider",
    "old_key_providers",
    "open_keyring",
]

KEYRING_DIR = "keyring"


def default_keyring_dir(workspace: Path) -> Path:
    """``<workspace>/.governed_memory/keyring``."""
    return Path(workspace) / GOVERNANCE_DIR / KEYRING_DIR


def _one(
    value: SecretStr | None, file: Path | None, name: str, *, required: bool
) -> KeyProvider | None:
    if value is not None and file is not None:
        raise KeyProviderError(
            f"both GOVERNED_MEMORY_{name} and GOVERNED_MEMORY_{name}_FILE are set; set only one"
        )
    if value is not None:
        return LocalKeyProvider.from_base64(
            value.get_secret_value(), source=f"GOVERNED_MEMORY_{name}"
        )
    if file is not None:
        return LocalKeyProvider.from_file(file)
    if required:
        raise KeyProviderError(
            "encryption is enabled but no master key is configured; set "
            "GOVERNED_MEMORY_MASTER_KEY (base64 of 32 bytes, from `governed-memory keys "
            "generate`) or GOVERNED_MEMORY_MASTER_KEY_FILE, or pass key_provider= in code"
        )
    return None


def key_provider(settings: Settings) -> KeyProvider:
    """The master key provider the settings describe (the old key chained in when set).

    Raises:
        KeyProviderError: no key, two keys, or a malformed or exposed key.
    """
    current = _one(settings.master_key, settings.master_key_file, "MASTER_KEY", required=True)
    assert current is not None
    old = old_key_providers(settings)
    return KeyChain(current, *old) if old else current


def old_key_providers(settings: Settings, old_key_file: Path | None = None) -> list[KeyProvider]:
    """The previous master key(s): from the settings and from ``old_key_file``."""
    found = []
    old = _one(
        settings.master_key_old, settings.master_key_old_file, "MASTER_KEY_OLD", required=False
    )
    if old is not None:
        found.append(old)
    if old_key_file is not None:
        found.append(LocalKeyProvider.from_file(old_key_file))
    return found


def open_keyring(
    storage: DeploymentStorage,
    settings: Settings,
    *,
    provider: KeyProvider | None = None,
    extra_old: Sequence[KeyProvider] = (),
    require_key: bool = True,
    clock: Clock | None = None,
    observer: CryptoObserver | None = None,
) -> Keyring:
    """The keyring in ``storage`` (:meth:`DeploymentStorage.key_storage`), with ``provider`` (else the settings' master key).

    ``extra_old`` adds providers accepted for unwrapping only (rotation).
    With ``require_key=False`` a missing master key gives a keyring that can
    only report its status.
    """
    folder = storage.key_storage()
    chosen: KeyProvider | None = provider
    if chosen is None and (
        require_key or settings.master_key is not None or settings.master_key_file is not None
    ):
        chosen = key_provider(settings)
    if chosen is not None and extra_old:
        if isinstance(chosen, KeyChain):
            chosen = KeyChain(chosen.current, *chosen.previous, *extra_old)
        else:
            chosen = KeyChain(chosen, *extra_old)
    if isinstance(folder, Path):
        return Keyring(folder, chosen, clock=clock, observer=observer)
    return Keyring(None, chosen, clock=clock, observer=observer, storage=folder)


def policy_store(
    memory_path: Path,
    header: Callable[[], str],
    *,
    encrypted: bool,
    keyring: Callable[[], Keyring],
    clock: Clock,
    durable: bool = False,
    syncer: GroupSync | None = None,
) -> AgentStore:
    """The store the policy asks for: encrypted when ``encrypted``, else plaintext.

    ``durable`` (``durability.sync = "commit"``): every append is on disk
    before it returns, its ``fdatasync`` shared through ``syncer`` with the
    process's other writers of the file.

    Either way, memory in the other form is refused rather than silently
    ignored (it would look like a fresh, empty memory).

    Raises:
        ConfigurationError: encrypted memory while encryption is off (the
            plaintext-side check; the encrypted store checks the other side).
    """
    if encrypted:
        return EncryptedAgentStore(
            memory_path,
            header,
            keyring=keyring(),
            clock=clock,
            fsync_appends=durable,
            syncer=syncer,
        )
    if (Path(memory_path).parent / ENCRYPTED_MEMORY).exists():
        raise ConfigurationError(
            f"{Path(memory_path).parent / ENCRYPTED_MEMORY} is encrypted but the policy does not "
            "enable encryption; set [encryption] enabled = true (with the master key) or run "
            "`governed-memory decrypt-workspace`"
        )
    return PlaintextAgentStore(
        memory_path, header, clock=clock, fsync_appends=durable, syncer=syncer
    )
