"""The KMS adapter example in docs/encryption.md works, against a fake KMS client."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from governed_memory import (
    Conversation,
    DecryptionError,
    Governance,
    KeyChain,
    KeyProvider,
    KeyUnavailableError,
    LocalKeyProvider,
    Policy,
    memory_md_path,
    rotate_keys,
)

DOC = Path(__file__).resolve().parent.parent / "docs" / "encryption.md"


def _example(name: str) -> dict[str, Any]:
    text = DOC.read_text(encoding="utf-8")
    found = re.search(rf"<!-- example: {name} -->\n```python\n(.*?)```", text, re.S)
    assert found, f"docs/encryption.md has no example {name!r}"
    namespace: dict[str, Any] = {}
    exec(compile(found.group(1), str(DOC), "exec"), namespace)
    return namespace


class FakeKms:
    """What the adapter uses of boto3's KMS client: encrypt/decrypt with an encryption context."""

    class exceptions:
        class InvalidCiphertextException(Exception):
            pass

    def __init__(self) -> None:
        self._key = AESGCM(bytes(32))
        self.calls = 0

    def _aad(self, key_id: str, context: dict[str, str]) -> bytes:
        return (key_id + repr(sorted(context.items()))).encode()

    def encrypt(
        self, *, KeyId: str, Plaintext: bytes, EncryptionContext: dict[str, str]
    ) -> dict[str, bytes]:
        self.calls += 1
        nonce = b"\x01" * 12
        return {
            "CiphertextBlob": nonce
            + self._key.encrypt(nonce, Plaintext, self._aad(KeyId, EncryptionContext))
        }

    def decrypt(
        self, *, KeyId: str, CiphertextBlob: bytes, EncryptionContext: dict[str, str]
    ) -> dict[str, bytes]:
        self.calls += 1
        try:
            plain = self._key.decrypt(
                CiphertextBlob[:12], CiphertextBlob[12:], self._aad(KeyId, EncryptionContext)
            )
        except InvalidTag:
            raise self.exceptions.InvalidCiphertextException() from None
        return {"Plaintext": plain}


ARN = "arn:aws:kms:eu-west-1:111122223333:key/example"


def test_the_documented_kms_adapter_is_a_key_provider(workspace: Path) -> None:
    adapter_cls = _example("kms-adapter")["AwsKmsKeyProvider"]
    kms = FakeKms()
    provider = adapter_cls(kms, ARN)
    assert isinstance(provider, KeyProvider)
    wrapped = provider.wrap(b"k" * 32, b"ctx")
    assert provider.unwrap(ARN, wrapped, b"ctx") == b"k" * 32
    with pytest.raises(DecryptionError):
        provider.unwrap(ARN, wrapped, b"another context")
    with pytest.raises(KeyUnavailableError):
        provider.unwrap("arn:other", wrapped, b"ctx")

    policy = Policy.model_validate({"encryption": {"enabled": True}})
    gov = Governance(workspace=workspace, policy=policy, key_provider=provider)
    conv = Conversation(name="c", memory_md_path=memory_md_path("A", workspace), governance=gov)
    conv.add("User", "message 0", subject_id="s")
    calls = kms.calls
    for n in range(1, 20):
        conv.add("User", f"message {n}", subject_id="s")
    assert kms.calls == calls  # data keys are unwrapped once and cached: no KMS call per message

    # Rotating from the KMS key to a local key (or back) is the same command.
    local = LocalKeyProvider(bytes(range(32)))
    rotate_keys(
        workspace,
        Governance(
            workspace=workspace, policy=policy, key_provider=KeyChain(local, provider)
        ).keyring,
    )
    again = Governance(workspace=workspace, policy=policy, key_provider=local)
    reread = Conversation(name="c", memory_md_path=memory_md_path("A", workspace), governance=again)
    assert "message 19" in reread.conversation_history[-1]["content"]
