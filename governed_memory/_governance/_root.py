"""The governance seam: everything a governed Conversation, Agent or CLI consults.

A :class:`Governance` bundles the effective policy, the workspace, the clock,
the consent registry, the store factory and the audit sink. The data path is
``Conversation -> Governance.check (the consent gate) -> store -> disk`` with
``Governance.audit`` beside it. Every governed operation passes through
:meth:`Governance.operation` (or :meth:`Governance.check`); the operations
and where they happen are listed with the gate protocol a Conversation sees,
``governed_memory._protocols.ConsentGate``.

The erasures the gate triggers (on a withdrawal, and the watch a live
Conversation keeps) are subject operations, a layer above: they are wired in
by the public ``governed_memory.Governance`` (``governed_memory._wiring``).

Extension points for the other layers (each has a working default):

* :meth:`Governance.store_factory` builds the agent store (plaintext; the
  encryption layer returns its encrypted store when
  ``policy.encryption.enabled``).
* :attr:`Governance.audit` is an :class:`AuditSink` (default
  :class:`NullAuditSink`; the audit layer supplies spans + a hash-chained log).
* ``key_provider`` and ``tracer_provider`` are held for those layers.

With no governance (``Conversation(governance=None)``) nothing here runs and
the bytes on disk are the reference's.
"""

from __future__ import annotations

import fnmatch
import functools
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from .._base import GOVERNANCE_DIR, Clock, SystemClock, resolve_workspace
from .._errors import ConfigurationError, ConsentRequiredError
from .._policy import (
    LOCAL_SUMMARIZER,
    Allowed,
    AuditSink,
    Decision,
    MissingConsent,
    NullAuditSink,
    Operation,
    Outcome,
    Policy,
    Settings,
    Skip,
    SummarizationFallback,
    SummarizerDecision,
    UseLocal,
    WithdrawalAction,
    is_local_model,
)
from .._records import ConsentAction, ConsentEvent, ConsentRegistry, validate_subject_id
from .._stores import AgentStore
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
    "Skip",
    "SummarizerDecision",
    "UseLocal",
    "is_local_model",
]

if TYPE_CHECKING:
    from .._crypto import Keyring, RecordSealing
    from .._protocols import ErasureWatch, SubjectRecord

logger = logging.getLogger("governed_memory")

_R = TypeVar("_R", bound="SubjectRecord")


@dataclass
class _Warned:
    keys: set[tuple[str | None, str | None, str]] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)


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
        tracer_provider: OpenTelemetry tracer provider for the audit layer.
        audit: the audit sink (default: :meth:`_default_audit`).
        consent: the consent registry (default: the one in the governance folder).
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
    ) -> None:
        self.settings = settings if settings is not None else Settings()
        self.workspace = resolve_workspace(workspace or self.settings.workspace_dir)
        if policy is None:
            from .._policy import resolve_policy

            policy = resolve_policy(self.settings).policy
        self.policy: Policy = policy
        self.clock: Clock = clock or SystemClock()
        self.key_provider = key_provider
        self.tracer_provider = tracer_provider
        self.consent = consent or ConsentRegistry(self.governance_dir, sealing=self.sealing)
        sink = audit if audit is not None else self._default_audit()
        # Building writes nothing: policy.load is recorded before this Governance's
        # first other entry (see _policy_load); a null sink has nothing to precede.
        self.audit: AuditSink = (
            sink
            if type(sink) is NullAuditSink
            else PolicyLoadSink(
                sink,
                {
                    "policy_id": self.policy.id,
                    "policy_version": self.policy.version,
                    "source": self.policy.source,
                },
            )
        )
        self._warned = _Warned()

    # -- extension points ----------------------------------------------

    def _default_audit(self) -> AuditSink:
        """The sink used when none is given.

        An :class:`~governed_memory.AuditTrail` (spans, plus the hash-chained
        log when ``audit.enabled``) when the policy enables audit or a tracer
        provider was passed; otherwise :class:`NullAuditSink`: default mode
        creates no spans and writes no audit files.
        """
        if not self.policy.audit.enabled and self.tracer_provider is None:
            return NullAuditSink()
        from .._audit import AuditTrail

        return AuditTrail.for_governance(self)

    def store_factory(self, memory_path: Path, header: Callable[[], str]) -> AgentStore:
        """Build the store for one agent's MEMORY.md: encrypted when ``encryption.enabled``."""
        from ._encryption import policy_store

        return policy_store(
            memory_path,
            header,
            encrypted=self.policy.encryption.enabled,
            keyring=lambda: self.keyring,
            clock=self.clock,
        )

    @functools.cached_property
    def keyring(self) -> Keyring:
        """The workspace's data keys (built on first use from ``key_provider`` or settings).

        ``keyring.shred_subject(id)`` / ``keyring.shred_agent(name)`` crypto-shred.

        Raises:
            KeyProviderError: no usable master key is configured.
        """
        from ._encryption import open_keyring

        return open_keyring(
            self.workspace,
            self.settings,
            provider=self.key_provider,
            clock=self.clock,
            observer=self.audit,
        )

    @functools.cached_property
    def sealing(self) -> RecordSealing | None:
        """How the governance registries keep their records: sealed when ``encryption.enabled``.

        None (plaintext records, as before) without encryption. The keyring is
        opened only when a record is first sealed or opened.
        """
        if not self.policy.encryption.enabled:
            return None
        from .._crypto import RecordSealing

        return RecordSealing(lambda: self.keyring)

    @property
    def governance_dir(self) -> Path:
        """``<workspace>/.governed_memory`` (not created by reading this)."""
        return self.workspace / GOVERNANCE_DIR

    def ensure_governance_dir(self) -> Path:
        """Create the governance folder 0700 if missing and return it."""
        from .._base import ensure_private_dir

        ensure_private_dir(self.governance_dir)
        return self.governance_dir

    # -- the consent gate ----------------------------------------------

    def check(
        self,
        operation: str,
        agent: str | None,
        subject_id: str | None,
        purpose: str | None = None,
    ) -> Decision:
        """Decide whether ``operation`` may touch disk for ``subject_id``.

        Costs one ``stat`` of the consent log when the policy needs consent,
        nothing otherwise; a withdrawal in another process counts from the
        next call. Missing consent gives :attr:`Outcome.MEMORY_ONLY` (logged
        once per agent, subject and purpose) or, under ``on_missing =
        "deny"``, raises.

        Raises:
            ConsentRequiredError: consent is missing and the policy denies.
        """
        op = operation if isinstance(operation, Operation) else Operation(operation)
        purpose = purpose or op.purpose
        if purpose not in self.policy.consent.required_for:
            return self._decision(
                op, Outcome.PERSIST, agent, subject_id, purpose, "no consent required"
            )
        if subject_id is not None and self.consent.is_granted(subject_id, purpose):
            self._warned.keys.discard(
                (agent, subject_id, purpose)
            )  # warn again on a new withdrawal
            return self._decision(
                op, Outcome.PERSIST, agent, subject_id, purpose, "consent granted"
            )
        why = (
            f"the message has no subject_id, so no '{purpose}' consent can apply"
            if subject_id is None
            else f"subject {subject_id!r} has not granted (or has withdrawn) '{purpose}' consent"
        )
        if self.policy.consent.on_missing is MissingConsent.DENY:
            self.audit.record(
                op.value,
                agent=agent,
                subject_id=subject_id,
                outcome="denied",
                **self._policy_attrs(purpose, why),
            )
            fix = (
                "pass subject_id= to the Conversation or add()"
                if subject_id is None
                else f"record it with `governed-memory consent grant --subject {subject_id} "
                f"--purpose {purpose}`"
            )
            raise ConsentRequiredError(
                f"{op.value} refused under policy {self.policy.id} v{self.policy.version}: "
                f"{why}; {fix}, or use a policy with consent.on_missing = 'memory_only'",
                subject_id=subject_id,
                purpose=purpose,
                operation=op.value,
            )
        self._warn_once(agent, subject_id, purpose, why)
        return self._decision(op, Outcome.MEMORY_ONLY, agent, subject_id, purpose, why)

    @contextmanager
    def operation(
        self, operation: str, agent: str | None, subject_id: str | None, **attrs: Any
    ) -> Iterator[Decision]:
        """Gate, run and audit one operation.

        Yields the :class:`Decision`; the caller does the disk work only when
        ``decision.persist``. On exit one audit record is written with the
        outcome ``ok``, ``memory_only`` or ``error``.
        """
        decision = self.check(operation, agent, subject_id)
        try:
            yield decision
        except BaseException as exc:
            self._audit_decision(decision, "error", error=type(exc).__name__, **attrs)
            raise
        self._audit_decision(decision, "ok" if decision.persist else "memory_only", **attrs)

    def _audit_decision(self, decision: Decision, outcome: str, **attrs: Any) -> None:
        if type(self.audit) is NullAuditSink:
            return  # skip building the attributes on the hot path
        self.audit.record(
            decision.operation,
            agent=decision.agent,
            subject_id=decision.subject_id,
            outcome=outcome,
            **decision.attributes(),
            **attrs,
        )

    # -- the operations a Conversation delegates ---------------------------

    def persist(
        self, store: AgentStore, block: str, *, agent: str | None, subject_id: str | None
    ) -> bool:
        """Append ``block`` if the gate allows; return whether it reached disk."""
        if (
            type(self.audit) is NullAuditSink
            and Operation.PERSIST.purpose not in self.policy.consent.required_for
        ):
            # Hot path (every add): nothing to check, nothing to record.
            store.append(block)
            return True
        decision = self.check(Operation.PERSIST, agent, subject_id)
        attrs = self._block_attrs(block)
        if decision.persist:
            try:
                store.append(block)
            except BaseException as exc:
                self._audit_decision(decision, "error", error=type(exc).__name__, **attrs)
                raise
        self._audit_decision(decision, "ok" if decision.persist else "memory_only", **attrs)
        return decision.persist

    def _block_attrs(self, block: str | None) -> dict[str, Any]:
        """Size (and, only under ``audit.include_content``, the text) of a block, for the audit."""
        if block is None or type(self.audit) is NullAuditSink:
            return {}
        attrs: dict[str, Any] = {"bytes": len(block.encode("utf-8"))}
        if self.policy.audit.include_content:
            from .._format import parse_memory

            records = parse_memory(block).records
            attrs["content"] = records[0].content if records else block
        return attrs

    def preload_text(self, text: str, *, agent: str | None) -> str | None:
        """``text`` (a MEMORY.md) without the records whose subject may not be read back.

        Each distinct subject passes the gate once. Returns None when no
        record is left, ``text`` unchanged when every record is.
        """
        from .._format import parse_memory

        parsed = parse_memory(text)
        kept = self.preload_records(parsed.records, agent=agent)
        if len(kept) == len(parsed.records):
            return text
        return parsed.preamble + "".join(r.raw for r in kept) if kept else None

    def preload_records(self, records: list[_R], *, agent: str | None) -> list[_R]:
        """The parsed records of a MEMORY.md whose subject may be read back.

        :meth:`preload_text` for a caller that has parsed the file already.
        Each distinct subject passes the gate once; ``records`` itself is
        returned when every record passes.
        """
        allowed: dict[str | None, bool] = {}
        for record in records:
            subject = record.subject_id
            if subject not in allowed:
                with self.operation(Operation.PRELOAD, agent, subject) as decision:
                    allowed[subject] = decision.persist
        if all(allowed.values()):
            return records
        return [r for r in records if allowed[r.subject_id]]

    def compact(
        self,
        store: AgentStore,
        first_block: str | None,
        *,
        agent: str | None,
        subject_id: str | None,
    ) -> Path | None:
        """Archive and replace the memory if the gate allows; return the archive path.

        Under ``memory_only`` the disk is left as it is (the in-memory history
        is still compacted by the caller).
        """
        with self.operation(Operation.ARCHIVE, agent, subject_id) as archiving:
            if not archiving.persist:
                self.audit.record(
                    Operation.COMPACT.value,
                    agent=agent,
                    subject_id=subject_id,
                    outcome="memory_only",
                    **archiving.attributes(),
                )
                return None
            with self.operation(
                Operation.COMPACT, agent, subject_id, **self._block_attrs(first_block)
            ):
                archive = store.compact(first_block)
        return archive

    def _decision(
        self,
        op: Operation,
        outcome: Outcome,
        agent: str | None,
        subject_id: str | None,
        purpose: str,
        reason: str,
    ) -> Decision:
        return Decision(
            operation=op.value,
            outcome=outcome,
            agent=agent,
            subject_id=subject_id,
            purpose=purpose,
            policy_id=self.policy.id,
            policy_version=self.policy.version,
            reason=reason,
            at=self.clock.now(),
        )

    def _policy_attrs(self, purpose: str, reason: str) -> dict[str, str]:
        return {
            "purpose": purpose,
            "policy_id": self.policy.id,
            "policy_version": self.policy.version,
            "reason": reason,
        }

    def _warn_once(self, agent: str | None, subject_id: str | None, purpose: str, why: str) -> None:
        key = (agent, subject_id, purpose)
        with self._warned.lock:
            if key in self._warned.keys:
                return
            self._warned.keys.add(key)
        logger.warning(
            "governed_memory: %s; agent %s keeps this subject's messages in memory only "
            "(policy %s v%s, consent.on_missing = 'memory_only'). Further messages are "
            "kept off disk silently until consent is granted.",
            why,
            agent or "<none>",
            self.policy.id,
            self.policy.version,
        )

    # -- summarizers -----------------------------------------------------

    def summarizer_decision(
        self,
        model: str,
        subjects: Iterable[str | None] = (),
        *,
        agent: str | None = None,
    ) -> SummarizerDecision:
        """Whether the summarizer ``model`` may see a transcript of ``subjects``.

        A model outside ``summarization.allowed_models``, an external model
        when ``summarization.external_allowed`` is false, or an external model
        while a subject lacks ``summarize`` consent (when the policy requires
        it) is never called: the result is :class:`UseLocal` or :class:`Skip`
        per ``summarization.fallback``. Local models need no consent: the
        transcript does not leave the process.
        """
        rules = self.policy.summarization
        reason = ""
        external = not is_local_model(model)
        if external and not rules.external_allowed:
            reason = f"model {model!r} is external and summarization.external_allowed is false"
        elif not _matches(model, rules.allowed_models):
            reason = (
                f"model {model!r} is not in summarization.allowed_models "
                f"{list(rules.allowed_models)}"
            )
        elif external and "summarize" in self.policy.consent.required_for:
            missing = sorted(
                {
                    s or "<no subject>"
                    for s in subjects
                    if s is None or not self.consent.is_granted(s, "summarize")
                }
            )
            if missing:
                reason = (
                    f"subjects {missing} have not granted 'summarize' consent "
                    f"for external model {model!r}"
                )
        result: SummarizerDecision
        if not reason:
            result = Allowed(model)
        elif rules.fallback is SummarizationFallback.LOCAL:
            result = UseLocal(reason=reason)
        else:
            result = Skip(reason=reason)
        outcome = {Allowed: "allowed", UseLocal: "use_local", Skip: "skip"}[type(result)]
        self.audit.record(
            Operation.SUMMARIZE.value,
            agent=agent,
            subject_id=None,
            outcome=outcome,
            model=model,
            **self._policy_attrs("summarize", reason or "allowed by the policy"),
        )
        return result

    # -- consent changes ---------------------------------------------------

    def grant(self, subject_id: str, purpose: str, *, actor: str) -> ConsentEvent:
        """Record that ``subject_id`` consents to ``purpose`` (durable on return)."""
        return self._consent_change(subject_id, purpose, ConsentAction.GRANT, actor)

    def withdraw(self, subject_id: str, purpose: str, *, actor: str) -> ConsentEvent:
        """Record that ``subject_id`` withdraws ``purpose``; the next write of any process obeys it.

        Withdrawing ``persist`` under ``consent.on_withdraw = "erase"`` also
        erases the subject's stored records (after ``consent.erase_grace``, as a
        scheduled erasure, when that is set). A legal hold blocking the
        erasure is logged; the withdrawal stands either way.
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

    def __repr__(self) -> str:
        return (
            f"Governance(workspace={str(self.workspace)!r}, policy={self.policy.id!r} "
            f"v{self.policy.version}, audit={self.audit.__class__.__name__})"
        )


def _matches(model: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(model, pattern) for pattern in patterns)


if TYPE_CHECKING:
    # Checked by mypy, never run: Governance is the gate Conversation, Agent and
    # ContextCompressor are given (they see it only through this protocol).
    from .._protocols import ConsentGate

    _AS_GATE: ConsentGate[AgentStore] = Governance()
