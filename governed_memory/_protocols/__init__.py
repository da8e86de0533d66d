"""Every extension point, documented once, on the protocol.

This package is the bottom of the layer stack (above ``_errors`` only) and
imports nothing but the standard library, so every layer can name the
interfaces it is given without reaching up:

* ``_extension``  Clock, KeyProvider, AuditSink, Summarizer: what a user plugs in
* ``_gate``       the consent gate Conversation, Agent and ContextCompressor see
* ``_default``    the configured policy's gate, for a Conversation built without
                  ``governance=`` (a provider the root package installs)
* ``_storage``    the storage seam: agent memory and archives, records, audit log,
                  keyring, leadership and purge journal, named by id (never by path)

Implementations live in the layers above (the file backend in ``_stores`` and
``_records``); ``governed_memory.testing`` ships in-memory fakes.
"""

from __future__ import annotations

from ._default import (
    CONFIGURED,
    Configured,
    GovernanceProvider,
    default_governance,
    install_governance_provider,
    policy_configured,
    resolve_governance,
)
from ._extension import AuditSink, Clock, KeyProvider, NullAuditSink, Summarizer, Transcript
from ._gate import (
    LOCAL_PREFIX,
    LOCAL_SUMMARIZER,
    Allowed,
    ConsentGate,
    Decision,
    Erased,
    ErasureWatch,
    Operation,
    Outcome,
    Skip,
    SubjectRecord,
    SummarizerDecision,
    UseLocal,
    is_local_model,
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
