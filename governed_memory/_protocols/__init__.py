"""Every extension point, documented once, on the protocol.

This package is the bottom of the layer stack (above ``_errors`` only) and
imports nothing but the standard library, so every layer can name the
interfaces it is given without reaching up:

* ``_extension``  Clock, KeyProvider, AuditSink, Summarizer: what a user plugs in
* ``_gate``       the consent gate Conversation, Agent and ContextCompressor see, and
                  the configured policy's gate for those built without ``governance=``
                  (a provider the root package installs)
* ``_storage``    the storage seam: agent memory and archives, records, audit log,
                  keyring, leadership and purge journal, named by id (never by path)

Implementations live in the layers above (the file backend in ``_stores`` and
``_records``); ``governed_memory.testing`` ships in-memory fakes.
"""

from __future__ import annotations

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
    default_governance,
    install_governance_provider,
    is_local_model,
    policy_configured,
    resolve_governance,
)
from ._storage import (
    AgentStore,
    AuditHeadView,
    AuditRecord,
    AuditStorage,
    Leadership,
    MemoryBackend,
    PurgeJournal,
    RecordDocument,
    RecordLog,
    StoredInfo,
    StoreFactory,
    WrappedKeyStorage,
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
    "Erased",
    "ErasureWatch",
    "GovernanceProvider",
    "KeyProvider",
    "Leadership",
    "MemoryBackend",
    "NullAuditSink",
    "Operation",
    "Outcome",
    "PurgeJournal",
    "RecordDocument",
    "RecordLog",
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
    "default_governance",
    "install_governance_provider",
    "is_local_model",
    "policy_configured",
    "resolve_governance",
]
