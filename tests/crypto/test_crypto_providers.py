"""Key providers: local master keys, the in-memory fake, and the rotation chain."""

from __future__ import annotations

import base64
import os
from pathlib import Path

import pytest

from governed_memory._crypto._providers import (
    InMemoryKeyProvider,
    KeyChain,
    KeyProvider,
    LocalKeyProvider,
    generate_master_key,
)
from governed_memory._errors import DecryptionError, KeyProviderError, KeyUnavailableError

KEY = bytes(range(32))


def test_local_provider_round_trips_and_binds_context() -> None:
    provider = LocalKeyProvider(KEY)
    wrapped = provider.wrap(b"k" * 32, b"ctx")
    assert provider.unwrap(provider.key_id, wrapped, b"ctx") == b"k" * 32
    with pytest.raises(DecryptionError):
        provider.unwrap(provider.key_id, wrapped, b"other context")


def test_key_id_is_stable_and_does_not_contain_the_key() -> None:
    a, b = LocalKeyProvider(KEY), LocalKeyProvider(KEY)
    assert a.key_id == b.key_id
    assert a.key_id.startswith("local:")
    assert KEY.hex() not in a.key_id
    assert LocalKeyProvider(bytes(32)).key_id != a.key_id


def test_wrong_key_id_is_reported_as_unavailable_not_as_damage() -> None:
    wrapped = LocalKeyProvider(KEY).wrap(b"k" * 32, b"")
    other = LocalKeyProvider(bytes(32))
    with pytest.raises(KeyUnavailableError, match="configured key is local:"):
        other.unwrap(LocalKeyProvider(KEY).key_id, wrapped, b"")


def test_flipped_wrapped_byte_fails_authentication() -> None:
    provider = LocalKeyProvider(KEY)
    wrapped = bytearray(provider.wrap(b"k" * 32, b""))
    wrapped[-1] ^= 1
    with pytest.raises(DecryptionError):
        provider.unwrap(provider.key_id, bytes(wrapped), b"")


@pytest.mark.parametrize("size", [0, 16, 31, 33])
def test_master_key_must_be_32_bytes(size: int) -> None:
    with pytest.raises(KeyProviderError, match=f"got {size}"):
        LocalKeyProvider(b"x" * size)


def test_base64_master_key_errors_name_the_source_and_the_fix() -> None:
    with pytest.raises(KeyProviderError, match="GOVERNED_MEMORY_MASTER_KEY is not valid base64"):
        LocalKeyProvider.from_base64("not base64!", source="GOVERNED_MEMORY_MASTER_KEY")
    short = base64.b64encode(b"x" * 16).decode()
    with pytest.raises(KeyProviderError, match=r"decodes to 16 bytes, not 32.*keys generate"):
        LocalKeyProvider.from_base64(short)


def test_generated_key_loads() -> None:
    text = generate_master_key()
    assert len(base64.b64decode(text)) == 32
    assert LocalKeyProvider.from_base64(text).key_id.startswith("local:")


def test_key_file_must_not_be_group_or_world_readable(tmp_path: Path) -> None:
    path = tmp_path / "master.key"
    path.write_text(generate_master_key() + "\n")
    os.chmod(path, 0o640)
    with pytest.raises(KeyProviderError, match=r"mode 0640.*chmod 600"):
        LocalKeyProvider.from_file(path)
    os.chmod(path, 0o604)
    with pytest.raises(KeyProviderError, match="group or others"):
        LocalKeyProvider.from_file(path)
    os.chmod(path, 0o600)
    assert LocalKeyProvider.from_file(path).key_id.startswith("local:")


def test_missing_key_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(KeyProviderError, match=r"nope.key cannot be opened"):
        LocalKeyProvider.from_file(tmp_path / "nope.key")


def test_in_memory_provider_rotates_keeps_old_keys_and_destroys() -> None:
    provider = InMemoryKeyProvider()
    first = provider.key_id
    wrapped = provider.wrap(b"d" * 32, b"c")
    second = provider.rotate()
    assert second != first and provider.key_id == second
    assert provider.unwrap(first, wrapped, b"c") == b"d" * 32
    provider.destroy(first)
    with pytest.raises(KeyUnavailableError):
        provider.unwrap(first, wrapped, b"c")
    assert ("wrap", first) in provider.calls


def test_key_chain_wraps_with_current_and_unwraps_with_any() -> None:
    old, new = LocalKeyProvider(KEY), LocalKeyProvider(bytes(32))
    wrapped_old = old.wrap(b"d" * 32, b"")
    chain = KeyChain(new, old)
    assert chain.key_id == new.key_id
    assert chain.unwrap(old.key_id, wrapped_old, b"") == b"d" * 32
    assert new.unwrap(new.key_id, chain.wrap(b"e" * 32, b""), b"") == b"e" * 32
    with pytest.raises(KeyUnavailableError, match="GOVERNED_MEMORY_MASTER_KEY_OLD"):
        KeyChain(new).unwrap(old.key_id, wrapped_old, b"")


def test_providers_satisfy_the_protocol() -> None:
    for provider in (LocalKeyProvider(KEY), InMemoryKeyProvider(), KeyChain(InMemoryKeyProvider())):
        assert isinstance(provider, KeyProvider)
