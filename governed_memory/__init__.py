"""governed_memory: persistent agent memory with consent, encryption, retention and audit.

The public names are re-exported here; everything else is internal.

The names are resolved lazily (PEP 562): ``import governed_memory`` imports
none of the submodules, and ``governed_memory.X`` (or ``from governed_memory
import X``) imports only the module that defines ``X``, on first use. So a
default-mode ``Conversation`` never pays for pydantic, cryptography,
OpenTelemetry, APScheduler or litellm, which only the policy layer and the
model calls need. Type checkers read the real imports under
``TYPE_CHECKING`` below; ``_EXPORTS`` says where each name lives at run time
(a test checks that both agree with ``__all__``).
"""

import importlib as _importlib
import typing as _typing

if _typing.TYPE_CHECKING:
    from ._audit import (
        AuditEntry,
        AuditEvent,
        AuditKey,
        AuditLog,
        AuditTrail,
        Finding,
        FindingKind,
        VerifyReport,
        generate_audit_key,
    )
    from ._audit import verify_log as verify_audit_log
    from ._audit._telemetry import configure_otlp
    from ._base._artefacts import ArtefactKind
    from ._base._clock import Clock, FixedClock, SystemClock
    from ._base._workspace import memory_md_path, resolve_workspace
    from ._crypto import (
        InMemoryKeyProvider,
        KeyChain,
        KeyProvider,
        Keyring,
        LocalKeyProvider,
        generate_master_key,
    )
    from ._crypto._sealed import RecordSealer
    from ._crypto._sealing import RecordSealing
    from ._crypto._status import KeyringStatus, keyring_status
    from ._errors import (
        AuditVerificationError,
        AuditWriteError,
        ConfigurationError,
        ConsentRequiredError,
        DecryptionError,
        EmptySummaryError,
        FormatVersionError,
        GovernedMemoryError,
        IntegrityError,
        InvalidAgentNameError,
        KeyProviderError,
        KeyShreddedError,
        KeyUnavailableError,
        ModelCallError,
        NotFoundError,
        SealedRecordError,
        StorageError,
        TokenizerError,
    )
    from ._format._records import MemoryFile, Record, parse_memory
    from ._format._tokenizer import counter_for
    from ._governance._root import (
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
    from ._keys._migration import MigrationReport, decrypt_workspace, encrypt_workspace
    from ._keys._rotation import RotationReport
    from ._keys._rotation import rotate as rotate_keys
    from ._memory._agent import Agent
    from ._memory._compressor import Backoff, ContextCompressor
    from ._memory._conversation import Conversation
    from ._memory._inspect import (
        AgentInfo,
        StoredRecord,
        agent_info,
        agent_names,
        agent_records,
        list_agents,
    )
    from ._memory._summarizers import (
        ExtractiveSummarizer,
        LiteLLMSummarizer,
        Summarizer,
        Transcript,
    )
    from ._policy._model import Policy, PolicyError, ResolvedPolicy, load_policy, resolve_policy
    from ._policy._settings import Settings
    from ._records._consent import ConsentEvent, ConsentRegistry
    from ._records._holds import Hold, HoldNotFoundError, HoldRegistry, HoldSet
    from ._retention import (
        AgentState,
        Artefact,
        Plan,
        PlanItem,
        PurgeInProgressError,
        PurgeReport,
        Retention,
        Rule,
        WorkspaceState,
    )
    from ._retention import plan as plan_retention
    from ._scheduler import PurgeScheduler, start_scheduler
    from ._stores import AgentStore, PlaintextAgentStore
    from ._stores._encrypted import EncryptedAgentStore, encrypted_store_factory
    from ._subjects import (
        ErasedDuringCompactionError,
        ErasureBlockedError,
        ErasureReceipt,
        ErasureScope,
        ExportResult,
        FileRemoval,
        ScheduledErasure,
        cancel_scheduled_erasure,
        erase,
        erasure_receipts,
        export_agent,
        export_subject,
        resume_erasures,
        run_due_erasures,
        schedule_erasure,
    )

__all__ = [
    "Agent",
    "AgentInfo",
    "AgentState",
    "AgentStore",
    "Allowed",
    "Artefact",
    "ArtefactKind",
    "AuditEntry",
    "AuditEvent",
    "AuditKey",
    "AuditLog",
    "AuditSink",
    "AuditTrail",
    "AuditVerificationError",
    "AuditWriteError",
    "Backoff",
    "Clock",
    "ConfigurationError",
    "ConsentEvent",
    "ConsentRegistry",
    "ConsentRequiredError",
    "ContextCompressor",
    "Conversation",
    "Decision",
    "DecryptionError",
    "EmptySummaryError",
    "EncryptedAgentStore",
    "ErasedDuringCompactionError",
    "ErasureBlockedError",
    "ErasureReceipt",
    "ErasureScope",
    "ExportResult",
    "ExtractiveSummarizer",
    "FileRemoval",
    "Finding",
    "FindingKind",
    "FixedClock",
    "FormatVersionError",
    "Governance",
    "GovernedMemoryError",
    "Hold",
    "HoldNotFoundError",
    "HoldRegistry",
    "HoldSet",
    "InMemoryKeyProvider",
    "IntegrityError",
    "InvalidAgentNameError",
    "KeyChain",
    "KeyProvider",
    "KeyProviderError",
    "KeyShreddedError",
    "KeyUnavailableError",
    "Keyring",
    "KeyringStatus",
    "LiteLLMSummarizer",
    "LocalKeyProvider",
    "MemoryFile",
    "MigrationReport",
    "ModelCallError",
    "NotFoundError",
    "NullAuditSink",
    "Outcome",
    "PlaintextAgentStore",
    "Plan",
    "PlanItem",
    "Policy",
    "PolicyError",
    "PurgeInProgressError",
    "PurgeReport",
    "PurgeScheduler",
    "Record",
    "RecordSealer",
    "RecordSealing",
    "ResolvedPolicy",
    "Retention",
    "RotationReport",
    "Rule",
    "ScheduledErasure",
    "SealedRecordError",
    "Settings",
    "Skip",
    "StorageError",
    "StoredRecord",
    "Summarizer",
    "SummarizerDecision",
    "SystemClock",
    "TokenizerError",
    "Transcript",
    "UseLocal",
    "VerifyReport",
    "WorkspaceState",
    "agent_info",
    "agent_names",
    "agent_records",
    "cancel_scheduled_erasure",
    "configure_otlp",
    "counter_for",
    "decrypt_workspace",
    "encrypt_workspace",
    "encrypted_store_factory",
    "erase",
    "erasure_receipts",
    "export_agent",
    "export_subject",
    "generate_audit_key",
    "generate_master_key",
    "keyring_status",
    "list_agents",
    "load_policy",
    "memory_md_path",
    "parse_memory",
    "plan_retention",
    "resolve_policy",
    "resolve_workspace",
    "resume_erasures",
    "rotate_keys",
    "run_due_erasures",
    "schedule_erasure",
    "start_scheduler",
    "verify_audit_log",
]

__version__ = "0.1.0"

# Where each public name is defined: "module" or "module:attribute" (renamed).
_EXPORTS: dict[str, str] = {
    "Agent": "_memory._agent",
    "AgentInfo": "_memory._inspect",
    "AgentState": "_retention",
    "AgentStore": "_stores",
    "Allowed": "_governance._root",
    "Artefact": "_retention",
    "ArtefactKind": "_base._artefacts",
    "AuditEntry": "_audit",
    "AuditEvent": "_audit",
    "AuditKey": "_audit",
    "AuditLog": "_audit",
    "AuditSink": "_governance._root",
    "AuditTrail": "_audit",
    "AuditVerificationError": "_errors",
    "AuditWriteError": "_errors",
    "Backoff": "_memory._compressor",
    "Clock": "_base._clock",
    "ConfigurationError": "_errors",
    "ConsentEvent": "_records._consent",
    "ConsentRegistry": "_records._consent",
    "ConsentRequiredError": "_errors",
    "ContextCompressor": "_memory._compressor",
    "Conversation": "_memory._conversation",
    "Decision": "_governance._root",
    "DecryptionError": "_errors",
    "EmptySummaryError": "_errors",
    "EncryptedAgentStore": "_stores._encrypted",
    "ErasedDuringCompactionError": "_subjects",
    "ErasureBlockedError": "_subjects",
    "ErasureReceipt": "_subjects",
    "ErasureScope": "_subjects",
    "ExportResult": "_subjects",
    "ExtractiveSummarizer": "_memory._summarizers",
    "FileRemoval": "_subjects",
    "Finding": "_audit",
    "FindingKind": "_audit",
    "FixedClock": "_base._clock",
    "FormatVersionError": "_errors",
    "Governance": "_governance._root",
    "GovernedMemoryError": "_errors",
    "Hold": "_records._holds",
    "HoldNotFoundError": "_records._holds",
    "HoldRegistry": "_records._holds",
    "HoldSet": "_records._holds",
    "InMemoryKeyProvider": "_crypto",
    "IntegrityError": "_errors",
    "InvalidAgentNameError": "_errors",
    "KeyChain": "_crypto",
    "KeyProvider": "_crypto",
    "KeyProviderError": "_errors",
    "KeyShreddedError": "_errors",
    "KeyUnavailableError": "_errors",
    "Keyring": "_crypto",
    "KeyringStatus": "_crypto._status",
    "LiteLLMSummarizer": "_memory._summarizers",
    "LocalKeyProvider": "_crypto",
    "MemoryFile": "_format._records",
    "MigrationReport": "_keys._migration",
    "ModelCallError": "_errors",
    "NotFoundError": "_errors",
    "NullAuditSink": "_governance._root",
    "Outcome": "_governance._root",
    "PlaintextAgentStore": "_stores",
    "Plan": "_retention",
    "PlanItem": "_retention",
    "Policy": "_policy._model",
    "PolicyError": "_policy._model",
    "PurgeInProgressError": "_retention",
    "PurgeReport": "_retention",
    "PurgeScheduler": "_scheduler",
    "Record": "_format._records",
    "RecordSealer": "_crypto._sealed",
    "RecordSealing": "_crypto._sealing",
    "ResolvedPolicy": "_policy._model",
    "Retention": "_retention",
    "RotationReport": "_keys._rotation",
    "Rule": "_retention",
    "ScheduledErasure": "_subjects",
    "SealedRecordError": "_errors",
    "Settings": "_policy._settings",
    "Skip": "_governance._root",
    "StorageError": "_errors",
    "StoredRecord": "_memory._inspect",
    "Summarizer": "_memory._summarizers",
    "SummarizerDecision": "_governance._root",
    "SystemClock": "_base._clock",
    "TokenizerError": "_errors",
    "Transcript": "_memory._summarizers",
    "UseLocal": "_governance._root",
    "VerifyReport": "_audit",
    "WorkspaceState": "_retention",
    "agent_info": "_memory._inspect",
    "agent_names": "_memory._inspect",
    "agent_records": "_memory._inspect",
    "cancel_scheduled_erasure": "_subjects",
    "configure_otlp": "_audit._telemetry",
    "counter_for": "_format._tokenizer",
    "decrypt_workspace": "_keys._migration",
    "encrypt_workspace": "_keys._migration",
    "encrypted_store_factory": "_stores._encrypted",
    "erase": "_subjects",
    "erasure_receipts": "_subjects",
    "export_agent": "_subjects",
    "export_subject": "_subjects",
    "generate_audit_key": "_audit",
    "generate_master_key": "_crypto",
    "keyring_status": "_crypto._status",
    "list_agents": "_memory._inspect",
    "load_policy": "_policy._model",
    "memory_md_path": "_base._workspace",
    "parse_memory": "_format._records",
    "plan_retention": "_retention:plan",
    "resolve_policy": "_policy._model",
    "resolve_workspace": "_base._workspace",
    "resume_erasures": "_subjects",
    "rotate_keys": "_keys._rotation:rotate",
    "run_due_erasures": "_subjects",
    "schedule_erasure": "_subjects",
    "start_scheduler": "_scheduler",
    "verify_audit_log": "_audit:verify_log",
}


if not _typing.TYPE_CHECKING:  # type checkers see the imports above, and flag unknown names

    def __getattr__(name: str) -> object:
        """Import the module defining ``name`` on first access, then keep the value."""
        try:
            target = _EXPORTS[name]
        except KeyError:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
        module, _, attribute = target.partition(":")
        value = getattr(_importlib.import_module(f"{__name__}.{module}"), attribute or name)
        globals()[name] = value  # later lookups skip __getattr__
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
