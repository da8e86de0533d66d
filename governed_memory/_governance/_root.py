"""The composition root: from settings and a policy, every collaborator a governed workspace needs.

A :class:`Governance` builds, and builds only (construction writes nothing):

* the effective policy (``settings`` -> policy file + overrides, else the
  built-in default) and the workspace;
* the deployment's one storage (``_storage``: the workspace's files, or the
  database the settings and the policy's ``[storage]`` table name), through
  which every part below, and every operation above, opens what it keeps;
* the consent registry and, under ``encryption.enabled``, the sealing of its
  records;
* the audit sink (:class:`NullAuditSink` in default mode, else the audit
  layer's trail), handed out as a :class:`PolicyLoadSink` so that
  ``policy.load`` is recorded before the first change this Governance governs;
* the keyring (on first use) and the store factory;
* the consent gate, a :class:`PolicyGate` (``_gate``), to which it delegates
  ``check``, ``operation``, ``persist``, ``preload_text``,
  ``preload_records``, ``compact`` and ``summarizer_decision``.

It also records consent changes (``grant``, ``withdraw``). The data path is
``Conversation -> gate -> store -> disk`` with ``Governance.audit`` beside it;
``governed_memory._protocols.ConsentGate`` lists the gated operations.

The erasures the gate triggers (on a withdrawal, and the watch a live
Conversation keeps) are subject operations, a layer above: they are wired in
by the public ``governed_memory.Governance`` (``governed_memory._wiring``).

With no governance (``Conversation(governance=None)``) nothing here runs and
the bytes on disk are the reference's.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .._base import GOVERNANCE_DIR, Clock, GroupSync, SystemClock, resolve_workspace
from .._errors import ConfigurationError
from .._policy import (
    LOCAL_SUMMARIZER,
    Allowed,
    AuditSink,
    Decision,
    NullAuditSink,
    Operation,
    Outcome,
    Policy,
    Settings,
    Skip,
    SummarizerDecision,
    UseLocal,
    WithdrawalAction,
    is_local_model,
)
from .._protocols import DeploymentStorage, MemoryBackend
from .._records import ConsentAction, ConsentEvent, ConsentRegistry, validate_subject_id
from .._stores import AgentStore
from . import _storage
from ._gate import PolicyGate
from ._policy_load import PolicyLoadSink

__all__ = [
    "LOCAL_SUMMARIZER",
    "Allowed",
    "AuditSink",
    "Decision",
    "Governance",
    "NullAuditSink",
    "Operation",
    "Outcome",
    "PolicyGate",
    "Skip",
    "SummarizerDecision",
    "UseLocal",
    "is_local_model",
]

if TYPE_CHECKING:
    from .._crypto import Keyring, RecordSealing, SigningKeyProvider
    from .._protocols import ErasureWatch, RecordPlace, SubjectRecord

_R = TypeVar("_R", bound="SubjectRecord")


class Governance:
    """The policy layer a Conversation, Agent or CLI command runs under.

    Args:
        workspace: the workspace folder (default: ``settings.workspace_dir``,
            else ``$WORKSPACE_DIR``, else ``./agent_workspace``).
        policy: the effective policy (default: resolved from ``settings``:
            policy file + overrides; the built-in default when none).
        settings: runtime settings (default: ``Settings()``, read from the
            environment).
        clock: time of decisions and consent records (default: system clock).
        key_provider: the master key provider for encryption at rest (default:
            from ``settings``: ``GOVERNED_MEMORY_MASTER_KEY`` or ``..._FILE``).
        signing_key: the Ed25519 key that signs receipts and audit checkpoints
            (a :class:`~governed_memory.SigningKeyProvider`; default: from
            ``settings``: ``GOVERNED_MEMORY_SIGNING_KEY`` or ``..._FILE``; none
            configured: receipts are unsigned). See docs/evidence.md.
        tracer_provider: OpenTelemetry tracer provider for the audit layer.
        audit: the audit sink (default: the audit trail when the policy enables
            audit, a tracer provider is passed or an OTLP endpoint is
            configured, spans only when audit is off; else :class:`NullAuditSink`).
        consent: the consent registry (default: the storage's).
        storage: where everything is kept (default: chosen by ``settings`` and
            the policy's ``[storage]`` table: the workspace's files, or the
            database at ``GOVERNED_MEMORY_DATABASE_URL``). Every store,
            registry, keyring, audit log, journal and lock of this Governance
            and of the operations run on it is opened through it.
    """

    def __init__(
        self,
        *,
        workspace: str | Path | None = None,
        policy: Policy | None = None,
        settings: Settings | None = None,
        clock: Clock | None = None,
        key_provider: Any = None,
        tracer_provider: Any = None,
        audit: AuditSink | None = None,
        consent: ConsentRegistry | None = None,
        signing_key: SigningKeyProvider | None = None,
        storage: DeploymentStorage | None = None,
    ) -> None:
        self._signing_key = signing_key
        self._keyring: Keyring | None = None
        self._keyring_lock = threading.Lock()
        # One group commit for every store this Governance builds: the
        # conversations of one agent in this process share its fdatasync.
        self._syncer = GroupSync()
        self.settings = settings if settings is not None else Settings()
        self.key_provider = key_provider
        self.tracer_provider = tracer_provider
        root = resolve_workspace(workspace or self.settings.workspace_dir)
        if policy is None:
            from .._policy import resolve_policy

            policy = resolve_policy(self.settings).policy
        clock = clock or SystemClock()
        # Opened here, but opening connects and writes nothing (the protocol's promise).
        self.storage: DeploymentStorage = (
            storage if storage is not None else _storage.open_storage(self.settings, policy, root)
        )
        self.sealing: RecordSealing | None = _record_sealing(policy, lambda: self.keyring)
        if consent is None:
            consent = ConsentRegistry(self.storage.records(), sealing=self.sealing)
        sink = (
            audit
            if audit is not None
            else _default_audit(self.settings, policy, self.storage, clock, tracer_provider)
        )
        self.gate = PolicyGate(
            policy=policy,
            consent=consent,
            workspace=root,
            clock=clock,
            audit=_announcing(sink, policy),
            store_factory=self.store_factory,
            erasure_watch=self.erasure_watch,
        )
        self._consent = consent

    # -- what the gate shares: set here, the gate follows ------------------

    @property
    def policy(self) -> Policy:
        """The effective policy."""
        return self.gate.policy

    @policy.setter
    def policy(self, value: Policy) -> None:
        self.gate.policy = value

    def subject_ref(self, subject_id: str) -> str:
        """How warnings and refusals name ``subject_id``: its keyed hash (see ``PolicyGate.subject_ref``)."""
        return self.gate.subject_ref(subject_id)

    def left_out(self, subjects: Iterable[str]) -> set[str]:
        """Which of ``subjects`` a summary must leave out (``summarization.without_consent``)."""
        return self.gate.left_out(subjects)

    @property
    def isolates_subjects(self) -> bool:
        """Whether the policy gives each data subject a memory of their own (``memory.isolation``)."""
        return self.gate.isolates_subjects

    @property
    def workspace(self) -> Path:
        """The governed workspace."""
        return self.gate.workspace

    @workspace.setter
    def workspace(self, value: Path) -> None:
        self.gate.workspace = Path(value)

    @property
    def clock(self) -> Clock:
        """The time of decisions, consent records and stores."""
        return self.gate.clock

    @clock.setter
    def clock(self, value: Clock) -> None:
        self.gate.clock = value

    @property
    def consent(self) -> ConsentRegistry:
        """The consent registry."""
        return self._consent

    @consent.setter
    def consent(self, value: ConsentRegistry) -> None:
        self._consent = value
        self.gate.consent = value

    @property
    def audit(self) -> AuditSink:
        """The audit sink every layer records through (``policy.load`` first; see ``_policy_load``)."""
        return self.gate.audit

    @audit.setter
    def audit(self, value: AuditSink) -> None:
        self.gate.audit = value

    # -- extension points ----------------------------------------------

    def store_factory(self, memory_path: Path, header: Callable[[], str]) -> AgentStore:
        """Build the store of the agent ``memory_path`` names, in the storage: encrypted when ``encryption.enabled``."""
        return self.storage.agent_store(
            memory_path,
            header,
            encrypted=self.policy.encryption.enabled,
            keyring=lambda: self.keyring,
            clock=self.clock,
            durable=self.policy.durability.commit,
            syncer=self._syncer,
        )

    @functools.cached_property
    def memory_backend(self) -> MemoryBackend:
        """Where the agents' memory is: the storage's agents, opened by :meth:`store_factory`.

        Export, erasure and inspection list and open agents through it.
        """
        return self.storage.memory_backend(self.store_factory)

    @property
    def keyring(self) -> Keyring:
        """The workspace's data keys (built on first use from ``key_provider`` or settings).

        ``keyring.shred_subject(id)`` / ``keyring.shred_agent(name)`` crypto-shred.
        Built once under a lock: a Governance is shared by every thread of a
        process (the configured policy's), and ``functools.cached_property``
        no longer locks from Python 3.12 on, so two threads could each build
        one and cache different key state.

        Raises:
            KeyProviderError: no usable master key is configured.
        """
        keyring = self._keyring
        if keyring is None:
            with self._keyring_lock:
                keyring = self._keyring
                if keyring is None:
                    from ._encryption import open_keyring

                    keyring = open_keyring(
                        self.storage,
                        self.settings,
                        provider=self.key_provider,
                        clock=self.clock,
                        observer=self.audit,
                    )
                    self._keyring = keyring
        return keyring

    @functools.cached_property
    def signer(self) -> SigningKeyProvider | None:
        """The key that signs receipts and audit checkpoints; None when none is configured.

        Read from the settings on first use (building a Governance reads no key file).

        Raises:
            KeyProviderError: the configured key is malformed or its file exposed.
        """
        if self._signing_key is not None:
            return self._signing_key
        from ._evidence import signing_key_from_settings

        return signing_key_from_settings(self.settings)

    @property
    def file_workspace(self) -> Path:
        """The folder the file storage keeps everything in (see ``_storage.file_workspace``).

        Raises:
            ConfigurationError: the deployment stores in a database.
        """
        return _storage.file_workspace(self.storage)

    @property
    def records(self) -> Path | RecordPlace:
        """What the registries take as their ``folder``: the storage's (:meth:`DeploymentStorage.records`)."""
        return self.storage.records()

    @property
    def governance_dir(self) -> Path:
        """The file storage's governance folder, ``<workspace>/.governed_memory`` (not created by reading this).

        The files the operations keep beside the records (exports, purge
        receipts) go there. Raises ConfigurationError on a database backend,
        which keeps no such folder.
        """
        return self.file_workspace / GOVERNANCE_DIR

    def ensure_governance_dir(self) -> Path:
        """Create the governance folder 0700 if missing and return it."""
        from .._base import ensure_private_dir

        ensure_private_dir(self.governance_dir)
        return self.governance_dir

    # -- the consent gate: delegated to the PolicyGate ----------------------

    def check(
        self,
        operation: str,
        agent: str | None,
        subject_id: str | None,
        purpose: str | None = None,
    ) -> Decision:
        """Decide whether ``operation`` may touch disk for ``subject_id`` (:meth:`PolicyGate.check`).

        Raises:
            ConsentRequiredError: consent is missing and the policy denies.
        """
        return self.gate.check(operation, agent, subject_id, purpose)

    def operation(
        self, operation: str, agent: str | None, subject_id: str | None, **attrs: Any
    ) -> AbstractContextManager[Decision]:
        """Gate, run and audit one operation (:meth:`PolicyGate.operation`)."""
        return self.gate.operation(operation, agent, subject_id, **attrs)

    def persist(
        self, store: AgentStore, block: str, *, agent: str | None, subject_id: str | None
    ) -> bool:
        """Append ``block`` if the gate allows; return whether it reached disk."""
        return self.gate.persist(store, block, agent=agent, subject_id=subject_id)

    def preload_text(self, text: str, *, agent: str | None) -> str | None:
        """``text`` (a MEMORY.md) without the records whose subject may not be read back."""
        return self.gate.preload_text(text, agent=agent)

    def preload_records(self, records: list[_R], *, agent: str | None) -> list[_R]:
        """The parsed records of a MEMORY.md whose subject may be read back."""
        return self.gate.preload_records(records, agent=agent)

    def compact(
        self,
        store: AgentStore,
        first_block: str | None,
        *,
        agent: str | None,
        subject_id: str | None,
    ) -> str | None:
        """Archive and replace the memory if the gate allows; return the archive's id."""
        return self.gate.compact(store, first_block, agent=agent, subject_id=subject_id)

    def summarizer_decision(
        self,
        model: str,
        subjects: Iterable[str | None] = (),
        *,
        agent: str | None = None,
    ) -> SummarizerDecision:
        """Whether the summarizer ``model`` may see a transcript of ``subjects`` (:meth:`PolicyGate.summarizer_decision`)."""
        return self.gate.summarizer_decision(model, subjects, agent=agent)

    # -- consent changes ---------------------------------------------------

    def grant(self, subject_id: str, purpose: str, *, actor: str) -> ConsentEvent:
        """Record that ``subject_id`` consents to ``purpose`` (durable on return)."""
        return self._consent_change(subject_id, purpose, ConsentAction.GRANT, actor)

    def withdraw(self, subject_id: str, purpose: str, *, actor: str) -> ConsentEvent:
        """Record that ``subject_id`` withdraws ``purpose``; the next write of any process obeys it.

        Withdrawing ``persist`` under ``consent.on_withdraw = "erase"`` also
        erases the subject's stored records (after ``consent.erase_grace``, as a
        scheduled erasure, when that is set), entered in the request register
        as a request of the subject's. A legal hold blocking the erasure is
        logged and left as an open request with its reason; the withdrawal
        stands either way.
        """
        event = self._consent_change(subject_id, purpose, ConsentAction.WITHDRAW, actor)
        if purpose == "persist" and self.policy.consent.on_withdraw is WithdrawalAction.ERASE:
            self._erase_after_withdrawal(event)
        return event

    # -- what the operations above wire in -----------------------------------
    # Erasure lives in governed_memory._subjects, a layer above (it needs stores,
    # holds and tombstones, and takes a Governance as its target). The public
    # Governance (governed_memory._wiring) overrides these two; this layer never
    # imports it.

    def erasure_watch(self, agent: str) -> ErasureWatch | None:
        """The watch a live Conversation of ``agent`` keeps on erasures (here: none)."""
        return None

    def _erase_after_withdrawal(self, event: ConsentEvent) -> None:
        raise ConfigurationError(
            f"policy {self.policy.id} erases a subject's records when consent is withdrawn "
            "(consent.on_withdraw = 'erase'), which this Governance cannot do; build "
            "governed_memory.Governance, which wires the erasure in"
        )

    def _consent_change(
        self, subject_id: str, purpose: str, action: ConsentAction, actor: str
    ) -> ConsentEvent:
        validate_subject_id(subject_id)
        purposes = self.policy.consent.purposes
        if purpose not in purposes:
            raise ConfigurationError(
                f"purpose {purpose!r} is not defined by policy {self.policy.id}; "
                f"use one of {list(purposes)} or add it to consent.purposes"
            )
        event = self.consent.make_event(
            subject_id,
            purpose,
            action,
            at=self.clock.now(),
            actor=actor,
            policy_id=self.policy.id,
            policy_version=self.policy.version,
        )
        self.consent.record(event)
        self.audit.record(
            f"consent.{action.value}",
            agent=None,
            subject_id=subject_id,
            outcome="ok",
            purpose=purpose,
            actor=actor,
            policy_id=self.policy.id,
            policy_version=self.policy.version,
        )
        return event

    # -- lifetime ------------------------------------------------------

    def close(self) -> None:
        """Release what this Governance holds open: its audit log and its storage.

        On a database: the audit entries this process left waiting are chained
        first and the background chaining thread stops, then the connection pool
        closes. On files: the audit segment's descriptors close. For a
        Governance built per task or request (one built per process can leave
        this to the process's exit); also ``with Governance() as gov:``. A call
        made after reopens what it needs: the pool reconnects, and audit
        entries written then wait until the next read of the log chains them.
        """
        close_audit = getattr(self.audit, "close", None)
        try:
            if close_audit is not None:
                close_audit()
        finally:
            self.storage.close()

    def __enter__(self) -> Governance:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"Governance(workspace={str(self.workspace)!r}, policy={self.policy.id!r} "
            f"v{self.policy.version}, audit={self.audit.__class__.__name__})"
        )


def _record_sealing(policy: Policy, keyring: Callable[[], Keyring]) -> RecordSealing | None:
    """How the governance registries keep their records: sealed when ``encryption.enabled``.

    None (plaintext records, as before) without encryption. The keyring is
    opened only when a record is first sealed or opened.
    """
    if not policy.encryption.enabled:
        return None
    from .._crypto import RecordSealing

    return RecordSealing(keyring)


def _default_audit(
    settings: Settings,
    policy: Policy,
    storage: DeploymentStorage,
    clock: Clock,
    tracer_provider: Any,
) -> AuditSink:
    """The sink used when none is given.

    An :class:`~governed_memory.AuditTrail` (spans, plus the hash-chained log
    when ``audit.enabled``) when the policy enables audit, a tracer provider
    was passed, or an OTLP endpoint is configured (``otlp_endpoint``: the CLI
    and the scheduler daemon then export to the global provider they
    install); with audit disabled that trail is spans only, writing nothing
    in the workspace. Otherwise :class:`NullAuditSink`: default mode creates
    no spans and writes no audit files. Building the trail writes nothing.

    The log is the storage's (:meth:`DeploymentStorage.audit_storage`): the
    key logic is ``AuditTrail.from_settings``'s, the place is the storage's.
    """
    wants_spans = tracer_provider is not None or bool(settings.otlp_endpoint)
    if not policy.audit.enabled and not wants_spans:
        return NullAuditSink()
    from .._audit import AuditTrail, audit_key_from_settings, previous_audit_keys

    key = audit_key_from_settings(settings)
    if key is None or not policy.audit.enabled:
        # No key (from_settings refuses that when audit is enabled), or spans only.
        return AuditTrail.from_settings(
            settings,
            policy=policy,
            workspace=storage.files or Path(),
            tracer_provider=tracer_provider,
            clock=clock,
        )
    previous = previous_audit_keys(settings)
    log = storage.audit_storage(policy.audit.log_dir, key, previous_keys=previous, clock=clock)
    return AuditTrail(
        key=key,
        previous_keys=previous,
        log=log,  # type: ignore[arg-type]  # AuditTrail takes an AuditLog; the audit helper widens it
        tracer_provider=tracer_provider,
        include_content=policy.audit.include_content,
        include_subject_ids=policy.audit.include_subject_ids,
    )


def _announcing(sink: AuditSink, policy: Policy) -> AuditSink:
    """``sink``, recording ``policy.load`` before its first other entry (a null sink as it is)."""
    if type(sink) is NullAuditSink:
        return sink  # records nothing, so there is nothing to precede
    return PolicyLoadSink(
        sink,
        {"policy_id": policy.id, "policy_version": policy.version, "source": policy.source},
    )


if TYPE_CHECKING:
    # Checked by mypy, never run: Governance is the gate Conversation, Agent and
    # ContextCompressor are given (they see it only through this protocol).
    from .._protocols import ConsentGate

    _AS_GATE: ConsentGate[AgentStore] = Governance()
