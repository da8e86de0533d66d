"""governed_memory: persistent agent memory with consent, encryption, retention and audit.

The public names are re-exported here; everything else is internal.
"""

from __future__ import annotations

from ._agent import Agent
from ._artefacts import ArtefactKind
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
from ._clock import Clock, FixedClock, SystemClock
from ._compressor import Backoff, ContextCompressor
from ._consent import ConsentEvent, ConsentRegistry
from ._conversation import Conversation
from ._crypto import (
    InMemoryKeyProvider,
    KeyChain,
    KeyProvider,
    Keyring,
    LocalKeyProvider,
    generate_master_key,
)
from ._crypto._sealed import RecordSealer
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
    StorageError,
    TokenizerError,
)
from ._format import MemoryFile, Record, parse_memory
from ._governance import (
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
from ._holds import Hold, HoldNotFoundError, HoldRegistry, HoldSet
from ._inspect import AgentInfo, StoredRecord, agent_info, agent_names, agent_records, list_agents
from ._migration import MigrationReport, decrypt_workspace, encrypt_workspace
from ._policy import Policy, PolicyError, ResolvedPolicy, load_policy, resolve_policy
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
from ._rotation import RotationReport
from ._rotation import rotate as rotate_keys
from ._scheduler import PurgeScheduler, start_scheduler
from ._settings import Settings
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
from ._summarizers import ExtractiveSummarizer, LiteLLMSummarizer, Summarizer, Transcript
from ._telemetry import configure_otlp
from ._tokenizer import counter_for
from ._workspace import memory_md_path, resolve_workspace

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
    "ResolvedPolicy",
    "Retention",
    "RotationReport",
    "Rule",
    "ScheduledErasure",
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
