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

Importing the package also installs the provider of the configured policy's
gate (:class:`_ConfiguredPolicy`): when the environment names a policy, a
``Conversation``, ``Agent`` or ``ContextCompressor`` built without
``governance=`` runs under it (docs/architecture.md, "The configured
policy"). The memory layer cannot import the composition root; this module,
above every layer, can, and does so only when a policy is configured.
"""

import importlib as _importlib
import os as _os
import typing as _typing

from ._base import VERSION as _VERSION
from ._protocols import install_governance_provider as _install_governance_provider

if _typing.TYPE_CHECKING:
    from ._audit import (
        AuditEntry,
        AuditEvent,
        AuditKey,
        AuditLog,
        AuditTrail,
        Finding,
        FindingKind,
        PublicVerifyReport,
        VerifyReport,
        configure_otlp,
        generate_audit_key,
    )
    from ._audit import Checkpoint as AuditCheckpoint
    from ._audit import verify_log as verify_audit_log
    from ._audit import verify_public as verify_audit_log_public
    from ._base import (
        ArtefactKind,
        Clock,
        FixedClock,
        SystemClock,
        memory_md_path,
        resolve_workspace,
    )
    from ._crypto import (
        InMemoryKeyProvider,
        KeyChain,
        KeyProvider,
        Keyring,
        KeyringStatus,
        LocalKeyProvider,
        LocalSigningKey,
        PublicKey,
        RecordSealer,
        RecordSealing,
        SignatureCheck,
        SigningKeyProvider,
        generate_master_key,
        keyring_status,
    )
    from ._errors import (
        AccountsFileError,
        AuditVerificationError,
        AuditWriteError,
        ConfigurationError,
        ConsentRequiredError,
        DatabaseError,
        DecryptionError,
        EmptySummaryError,
        ErasedDuringCompactionError,
        ErasureBlockedError,
        FormatVersionError,
        GovernedMemoryError,
        HoldNotFoundError,
        IntegrityError,
        InvalidAgentNameError,
        KeyProviderError,
        KeyShreddedError,
        KeyUnavailableError,
        ModelCallError,
        NotFoundError,
        PolicyError,
        PurgeInProgressError,
        RectificationBlockedError,
        SchemaVersionError,
        SealedRecordError,
        StorageError,
        TokenizerError,
    )
    from ._format import MemoryFile, Record, counter_for, parse_memory
    from ._governance import (
        Allowed,
        AuditSink,
        Decision,
        NullAuditSink,
        Outcome,
        Skip,
        SummarizerDecision,
        UseLocal,
    )
    from ._keys import MigrationReport, RotationReport, decrypt_workspace, encrypt_workspace
    from ._keys import rotate as rotate_keys
    from ._memory import (
        Agent,
        AgentInfo,
        Backoff,
        ContextCompressor,
        Conversation,
        ExtractiveSummarizer,
        LiteLLMSummarizer,
        StoredRecord,
        Summarizer,
        Transcript,
        agent_info,
        agent_names,
        agent_records,
        list_agents,
    )
    from ._policy import Policy, ResolvedPolicy, Settings, load_policy, resolve_policy
    from ._records import (
        ConsentEvent,
        ConsentRegistry,
        Hold,
        HoldRegistry,
        HoldSet,
        RequestRegister,
        SubjectRequest,
        verify_receipt,
    )
    from ._retention import (
        AgentState,
        Artefact,
        Plan,
        PlanItem,
        PurgeReport,
        Retention,
        Rule,
        WorkspaceState,
    )
    from ._retention import plan as plan_retention
    from ._scheduler import PurgeScheduler, schedule_status, start_scheduler
    from ._stores import (
        AgentStore,
        EncryptedAgentStore,
        PlaintextAgentStore,
        encrypted_store_factory,
    )
    from ._subjects import (
        ErasureReceipt,
        ErasureScope,
        ExportResult,
        FileRemoval,
        FoundReceipt,
        RectificationReceipt,
        ScheduledErasure,
        SubjectRecord,
        acting_as,
        cancel_scheduled_erasure,
        close_request,
        erase,
        erasure_receipts,
        export_agent,
        export_subject,
        extend_request,
        open_request,
        rectification_receipts,
        rectify,
        resume_erasures,
        resume_rectifications,
        run_due_erasures,
        schedule_erasure,
        stored_receipt,
        subject_receipts,
        subject_records,
        verify_request,
    )
    from ._subjects import Standing as RequestStanding
    from ._subjects import standings as request_standings
    from ._wiring import Governance

__all__ = [
    "AccountsFileError",
    "Agent",
    "AgentInfo",
    "AgentState",
    "AgentStore",
    "Allowed",
    "Artefact",
    "ArtefactKind",
    "AuditCheckpoint",
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
    "DatabaseError",
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
    "FoundReceipt",
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
    "LocalSigningKey",
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
    "PublicKey",
    "PublicVerifyReport",
    "PurgeInProgressError",
    "PurgeReport",
    "PurgeScheduler",
    "Record",
    "RecordSealer",
    "RecordSealing",
    "RectificationBlockedError",
    "RectificationReceipt",
    "RequestRegister",
    "RequestStanding",
    "ResolvedPolicy",
    "Retention",
    "RotationReport",
    "Rule",
    "ScheduledErasure",
    "SchemaVersionError",
    "SealedRecordError",
    "Settings",
    "SignatureCheck",
    "SigningKeyProvider",
    "Skip",
    "StorageError",
    "StoredRecord",
    "SubjectRecord",
    "SubjectRequest",
    "Summarizer",
    "SummarizerDecision",
    "SystemClock",
    "TokenizerError",
    "Transcript",
    "UseLocal",
    "VerifyReport",
    "WorkspaceState",
    "acting_as",
    "agent_info",
    "agent_names",
    "agent_records",
    "cancel_scheduled_erasure",
    "close_request",
    "configure_otlp",
    "counter_for",
    "decrypt_workspace",
    "encrypt_workspace",
    "encrypted_store_factory",
    "erase",
    "erasure_receipts",
    "export_agent",
    "export_subject",
    "extend_request",
    "generate_audit_key",
    "generate_master_key",
    "keyring_status",
    "list_agents",
    "load_policy",
    "memory_md_path",
    "open_request",
    "parse_memory",
    "plan_retention",
    "rectification_receipts",
    "rectify",
    "request_standings",
    "resolve_policy",
    "resolve_workspace",
    "resume_erasures",
    "resume_rectifications",
    "rotate_keys",
    "run_due_erasures",
    "schedule_erasure",
    "schedule_status",
    "start_scheduler",
    "stored_receipt",
    "subject_receipts",
    "subject_records",
    "verify_audit_log",
    "verify_audit_log_public",
    "verify_receipt",
    "verify_request",
]

__version__ = _VERSION

# Where each public name is defined: "module" or "module:attribute" (renamed).
_EXPORTS: dict[str, str] = {
    "Agent": "_memory",
    "AgentInfo": "_memory",
    "AgentState": "_retention",
    "AgentStore": "_stores",
    "Allowed": "_governance",
    "Artefact": "_retention",
    "ArtefactKind": "_base",
    "AuditCheckpoint": "_audit:Checkpoint",
    "AuditEntry": "_audit",
    "AuditEvent": "_audit",
    "AuditKey": "_audit",
    "AuditLog": "_audit",
    "AuditSink": "_governance",
    "AuditTrail": "_audit",
    "AccountsFileError": "_errors",
    "AuditVerificationError": "_errors",
    "AuditWriteError": "_errors",
    "Backoff": "_memory",
    "Clock": "_base",
    "ConfigurationError": "_errors",
    "ConsentEvent": "_records",
    "ConsentRegistry": "_records",
    "ConsentRequiredError": "_errors",
    "ContextCompressor": "_memory",
    "Conversation": "_memory",
    "Decision": "_governance",
    "DecryptionError": "_errors",
    "EmptySummaryError": "_errors",
    "EncryptedAgentStore": "_stores",
    "ErasedDuringCompactionError": "_errors",
    "ErasureBlockedError": "_errors",
    "ErasureReceipt": "_subjects",
    "ErasureScope": "_subjects",
    "ExportResult": "_subjects",
    "ExtractiveSummarizer": "_memory",
    "FileRemoval": "_subjects",
    "Finding": "_audit",
    "FindingKind": "_audit",
    "FixedClock": "_base",
    "FoundReceipt": "_subjects",
    "FormatVersionError": "_errors",
    "Governance": "_wiring",
    "GovernedMemoryError": "_errors",
    "Hold": "_records",
    "HoldNotFoundError": "_errors",
    "HoldRegistry": "_records",
    "HoldSet": "_records",
    "InMemoryKeyProvider": "_crypto",
    "IntegrityError": "_errors",
    "InvalidAgentNameError": "_errors",
    "KeyChain": "_crypto",
    "KeyProvider": "_crypto",
    "KeyProviderError": "_errors",
    "KeyShreddedError": "_errors",
    "KeyUnavailableError": "_errors",
    "Keyring": "_crypto",
    "KeyringStatus": "_crypto",
    "LiteLLMSummarizer": "_memory",
    "LocalKeyProvider": "_crypto",
    "LocalSigningKey": "_crypto",
    "MemoryFile": "_format",
    "MigrationReport": "_keys",
    "ModelCallError": "_errors",
    "NotFoundError": "_errors",
    "NullAuditSink": "_governance",
    "Outcome": "_governance",
    "PlaintextAgentStore": "_stores",
    "Plan": "_retention",
    "PlanItem": "_retention",
    "Policy": "_policy",
    "PolicyError": "_errors",
    "PublicKey": "_crypto",
    "PublicVerifyReport": "_audit",
    "PurgeInProgressError": "_errors",
    "PurgeReport": "_retention",
    "PurgeScheduler": "_scheduler",
    "Record": "_format",
    "RecordSealer": "_crypto",
    "RecordSealing": "_crypto",
    "RequestRegister": "_records",
    "RequestStanding": "_subjects:Standing",
    "ResolvedPolicy": "_policy",
    "Retention": "_retention",
    "RotationReport": "_keys",
    "Rule": "_retention",
    "RectificationBlockedError": "_errors",
    "RectificationReceipt": "_subjects",
    "ScheduledErasure": "_subjects",
    "SubjectRecord": "_subjects",
    "SealedRecordError": "_errors",
    "Settings": "_policy",
    "SignatureCheck": "_crypto",
    "SigningKeyProvider": "_crypto",
    "Skip": "_governance",
    "StorageError": "_errors",
    "DatabaseError": "_errors",
    "SchemaVersionError": "_errors",
    "StoredRecord": "_memory",
    "SubjectRequest": "_records",
    "Summarizer": "_memory",
    "SummarizerDecision": "_governance",
    "SystemClock": "_base",
    "TokenizerError": "_errors",
    "Transcript": "_memory",
    "UseLocal": "_governance",
    "VerifyReport": "_audit",
    "WorkspaceState": "_retention",
    "agent_info": "_memory",
    "agent_names": "_memory",
    "agent_records": "_memory",
    "acting_as": "_subjects",
    "cancel_scheduled_erasure": "_subjects",
    "close_request": "_subjects",
    "configure_otlp": "_audit",
    "counter_for": "_format",
    "decrypt_workspace": "_keys",
    "encrypt_workspace": "_keys",
    "encrypted_store_factory": "_stores",
    "erase": "_subjects",
    "erasure_receipts": "_subjects",
    "export_agent": "_subjects",
    "export_subject": "_subjects",
    "extend_request": "_subjects",
    "generate_audit_key": "_audit",
    "generate_master_key": "_crypto",
    "keyring_status": "_crypto",
    "list_agents": "_memory",
    "load_policy": "_policy",
    "memory_md_path": "_base",
    "open_request": "_subjects",
    "parse_memory": "_format",
    "plan_retention": "_retention:plan",
    "request_standings": "_subjects:standings",
    "resolve_policy": "_policy",
    "resolve_workspace": "_base",
    "rectification_receipts": "_subjects",
    "rectify": "_subjects",
    "resume_erasures": "_subjects",
    "resume_rectifications": "_subjects",
    "rotate_keys": "_keys:rotate",
    "run_due_erasures": "_subjects",
    "schedule_erasure": "_subjects",
    "schedule_status": "_scheduler",
    "start_scheduler": "_scheduler",
    "stored_receipt": "_subjects",
    "subject_receipts": "_subjects",
    "subject_records": "_subjects",
    "verify_audit_log": "_audit:verify_log",
    "verify_request": "_subjects",
    "verify_audit_log_public": "_audit:verify_public",
    "verify_receipt": "_records",
}


# The settings that are not a policy: keys, endpoints, folders. Every other
# GOVERNED_MEMORY_* variable configures one: GOVERNED_MEMORY_POLICY, an override
# GOVERNED_MEMORY_<SECTION>__<KEY>, or a misspelt name (which Settings() then refuses,
# naming it, instead of the process running ungoverned). A test checks this list
# against the fields of Settings.
_NOT_A_POLICY = frozenset(
    {
        "GOVERNED_MEMORY_ACTOR",
        "GOVERNED_MEMORY_AUDIT_KEY",
        "GOVERNED_MEMORY_KEYRING_DIR",
        "GOVERNED_MEMORY_MASTER_KEY",
        "GOVERNED_MEMORY_MASTER_KEY_FILE",
        "GOVERNED_MEMORY_MASTER_KEY_OLD",
        "GOVERNED_MEMORY_MASTER_KEY_OLD_FILE",
        "GOVERNED_MEMORY_OTLP_ENDPOINT",
        "GOVERNED_MEMORY_OTLP_HEADERS",
        "GOVERNED_MEMORY_SERVICE_NAME",
        "GOVERNED_MEMORY_SIGNING_KEY",
        "GOVERNED_MEMORY_SIGNING_KEY_FILE",
    }
)


class _ConfiguredPolicy:
    """The gate of the policy the environment configures, for code that passes no ``governance=``.

    ``configured`` looks at the names of the environment only, so default mode
    loads neither pydantic nor cryptography; the rest imports the wiring layer
    on first use.
    """

    def configured(self) -> bool:
        for name in _os.environ:
            upper = name.upper()
            if upper.startswith("GOVERNED_MEMORY_") and upper not in _NOT_A_POLICY:
                return True
        return False

    def governance(self) -> "Governance":
        from ._wiring import shared_governance

        return shared_governance()

    def refuse_ungoverned(self, what: str) -> None:
        from ._wiring import refuse_ungoverned

        refuse_ungoverned(what)


_install_governance_provider(_ConfiguredPolicy())


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
