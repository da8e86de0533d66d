"""From settings to the deployment's signing key (signed receipts and audit checkpoints).

The signing key comes from exactly one of ``GOVERNED_MEMORY_SIGNING_KEY``
(base64 of a 32-byte Ed25519 private key), ``GOVERNED_MEMORY_SIGNING_KEY_FILE``
(a file only its owner may read) or a provider passed in code
(``Governance(signing_key=...)``). Without one, receipts are written
unsigned, unless the policy sets ``evidence.require_signing``.
"""

from __future__ import annotations

from .._crypto import LocalSigningKey, SigningKeyProvider
from .._errors import ConfigurationError, KeyProviderError
from .._policy import Policy, Settings

__all__ = ["missing_signing_key", "signing_key_from_settings"]


def signing_key_from_settings(settings: Settings) -> SigningKeyProvider | None:
    """The signing key the settings configure; None when none is.

    Raises:
        KeyProviderError: both variables are set, or the key is malformed or
            its file is readable by others.
    """
    if settings.signing_key is not None and settings.signing_key_file is not None:
        raise KeyProviderError(
            "both GOVERNED_MEMORY_SIGNING_KEY and GOVERNED_MEMORY_SIGNING_KEY_FILE are set; "
            "set only one"
        )
    if settings.signing_key is not None:
        return LocalSigningKey.from_base64(
            settings.signing_key.get_secret_value(), source="GOVERNED_MEMORY_SIGNING_KEY"
        )
    if settings.signing_key_file is not None:
        return LocalSigningKey.from_file(settings.signing_key_file)
    return None


def missing_signing_key(policy: Policy, what: str) -> ConfigurationError:
    """The error for ``what`` (an erasure, ...) that policy requires signed but has no key for."""
    return ConfigurationError(
        f"policy {policy.id} v{policy.version} requires signed evidence "
        f"(evidence.require_signing = true), but no signing key is configured, so {what} is "
        "refused before anything is written; create a key with `governed-memory keys "
        "signing-keygen --out FILE` and set GOVERNED_MEMORY_SIGNING_KEY_FILE=FILE "
        "(docs/evidence.md)"
    )
