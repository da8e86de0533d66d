"""The composition root and the consent gate.

* ``_root``         ``Governance``: builds policy, consent, audit, keyring, sealing,
                    store factory and the gate from settings; writes nothing
* ``_gate``         ``PolicyGate``: the consent gate (decide, run, audit)
* ``_policy_load``  the audit sink a Governance hands out (``policy.load`` first)
* ``_encryption``   from settings to a key provider and a keyring
* ``_evidence``     from settings to the signing key (signed receipts, checkpoints)
* ``_storage``      ``FileStorage`` (the workspace's files) and ``open_storage``: which
                    ``DeploymentStorage`` the settings and ``[storage]`` choose

For the CLI (documented internal names): ``open_keyring`` opens the keyring
from settings without a Governance, so ``keys status`` works with no master
key configured and ``keys rotate`` can add the old key as unwrap-only;
``signing_key_from_settings`` finds the signing key for ``keys signing-public``
and ``audit checkpoint``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._base import lazy_attributes

# Names other layers use, imported on first use (PEP 562) so that importing this
# package loads none of its modules until one is needed.
if TYPE_CHECKING:
    from ._encryption import open_keyring
    from ._evidence import missing_signing_key, signing_key_from_settings
    from ._gate import ConsentLookup, PolicyGate
    from ._policy_load import PolicyLoadSink
    from ._root import (
        Allowed,
        AuditSink,
        Decision,
        Governance,
        NullAuditSink,
        Outcome,
        Skip,
        SummarizerDecision,
        UseLocal,
    )
    from ._storage import FileStorage, file_workspace, open_storage, storage_backend, storage_for

_LAZY: dict[str, str] = {
    "open_keyring": "._encryption",
    "missing_signing_key": "._evidence",
    "signing_key_from_settings": "._evidence",
    "ConsentLookup": "._gate",
    "PolicyGate": "._gate",
    "PolicyLoadSink": "._policy_load",
    "Allowed": "._root",
    "AuditSink": "._root",
    "Decision": "._root",
    "Governance": "._root",
    "NullAuditSink": "._root",
    "Outcome": "._root",
    "Skip": "._root",
    "SummarizerDecision": "._root",
    "UseLocal": "._root",
    "FileStorage": "._storage",
    "open_storage": "._storage",
    "storage_backend": "._storage",
    "storage_for": "._storage",
    "file_workspace": "._storage",
}

if not TYPE_CHECKING:  # type checkers read the imports above
    __getattr__ = lazy_attributes(__name__, _LAZY)

__all__ = [
    "Allowed",
    "AuditSink",
    "ConsentLookup",
    "Decision",
    "FileStorage",
    "Governance",
    "NullAuditSink",
    "Outcome",
    "PolicyGate",
    "PolicyLoadSink",
    "Skip",
    "SummarizerDecision",
    "UseLocal",
    "file_workspace",
    "missing_signing_key",
    "open_keyring",
    "open_storage",
    "signing_key_from_settings",
    "storage_backend",
    "storage_for",
]
