"""Every extension point, documented once, on the protocol.

This package is the bottom of the layer stack (above ``_errors`` only) and
imports nothing but the standard library, so every layer can name the
interfaces it is given without reaching up:

* ``_extension``  Clock, KeyProvider, AuditSink, Summarizer: what a user plugs in
* ``_gate``       the consent gate Conversation, Agent and ContextCompressor see, and
                  the configured policy's gate for those built without ``governance=``
                  (a provider the root package installs, in the slot ``_provider`` keeps)
* ``_storage``    the storage seam: agent memory and archives, records, audit log,
                  keyring, leadership and purge journal, named by id (never by path)

Implementations live in the layers above (the file backend in ``_stores`` and
``_records``); ``governed_memory.testing`` ships in-memory fakes.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._extension import AuditSink, Clock, KeyProvider, NullAuditSink, Summarizer, Transcript
    from ._gate import (
        CONFIGURED,
        LOCAL_PREFIX,
        LOCAL_SUMMARIZER,
        Allowed,
        Configured,
        ConsentGate,
        Decision,
        Erased,
        ErasureWatch,
        GovernanceProvider,
        Operation,
        Outcome,
        Rectified,
        Skip,
        SubjectRecord,
        SummarizerDecision,
        UseLocal,
        is_local_model,
        resolve_governance,
    )
    from ._provider import default_governance, install_governance_provider, policy_configured
    from ._storage import (
        AgentStore,
        AuditHeadView,
        AuditRecord,
        AuditStorage,
        DeploymentStorage,
        Leadership,
        LineBatch,
        MemoryBackend,
        PurgeJournal,
        RecordDocument,
        RecordLock,
        RecordLog,
        RecordPlace,
        StoredInfo,
        StoreFactory,
        WrappedKeyStorage,
        WriteGuard,
    )

__all__ = [
    "CONFIGURED",
    "LOCAL_PREFIX",
    "LOCAL_SUMMARIZER",
    "AgentStore",
    "Allowed",
    "AuditHeadView",
    "AuditRecord",
    "AuditSink",
    "AuditStorage",
    "Clock",
    "Configured",
    "ConsentGate",
    "Decision",
    "DeploymentStorage",
    "Erased",
    "ErasureWatch",
    "GovernanceProvider",
    "KeyProvider",
    "Leadership",
    "LineBatch",
    "MemoryBackend",
    "NullAuditSink",
    "Operation",
    "Outcome",
    "PurgeJournal",
    "RecordDocument",
    "RecordLock",
    "RecordLog",
    "RecordPlace",
    "Rectified",
    "Skip",
    "StoreFactory",
    "StoredInfo",
    "SubjectRecord",
    "Summarizer",
    "SummarizerDecision",
    "Transcript",
    "UseLocal",
    "WrappedKeyStorage",
    "WriteGuard",
    "default_governance",
    "install_governance_provider",
    "is_local_model",
    "policy_configured",
    "resolve_governance",
]

_EXPORTS: dict[str, str] = {
    "AgentStore": "._storage",
    "Allowed": "._gate",
    "AuditHeadView": "._storage",
    "AuditRecord": "._storage",
    "AuditSink": "._extension",
    "AuditStorage": "._storage",
    "CONFIGURED": "._gate",
    "Clock": "._extension",
    "Configured": "._gate",
    "ConsentGate": "._gate",
    "Decision": "._gate",
    "DeploymentStorage": "._storage",
    "Erased": "._gate",
    "ErasureWatch": "._gate",
    "GovernanceProvider": "._gate",
    "KeyProvider": "._extension",
    "LOCAL_PREFIX": "._gate",
    "LOCAL_SUMMARIZER": "._gate",
    "Leadership": "._storage",
    "LineBatch": "._storage",
    "MemoryBackend": "._storage",
    "NullAuditSink": "._extension",
    "Operation": "._gate",
    "Outcome": "._gate",
    "PurgeJournal": "._storage",
    "RecordDocument": "._storage",
    "RecordLock": "._storage",
    "RecordLog": "._storage",
    "RecordPlace": "._storage",
    "Rectified": "._gate",
    "Skip": "._gate",
    "StoreFactory": "._storage",
    "StoredInfo": "._storage",
    "SubjectRecord": "._gate",
    "Summarizer": "._extension",
    "SummarizerDecision": "._gate",
    "Transcript": "._extension",
    "UseLocal": "._gate",
    "WrappedKeyStorage": "._storage",
    "WriteGuard": "._storage",
    "default_governance": "._provider",
    "install_governance_provider": "._provider",
    "is_local_model": "._gate",
    "policy_configured": "._provider",
    "resolve_governance": "._gate",
}


if not TYPE_CHECKING:  # type checkers see the imports above

    def __getattr__(name: str) -> object:
        """Import the module defining ``name`` on first access, then keep the value.

        Lazy (PEP 562) so that ``import governed_memory``, which installs the
        policy provider, loads ``_provider`` alone (``governed-memory --help``
        starts without the protocol modules). The same pattern as
        ``_base.lazy_attributes``, written out because ``_base`` is a layer above.
        """
        try:
            module = _EXPORTS[name]
        except KeyError:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module, __name__), name)
        globals()[name] = value  # later lookups skip __getattr__
        return value
