"""The consent gate: every governed operation decides here first and is audited after.

:class:`PolicyGate` is the :class:`~governed_memory._protocols.ConsentGate` a
governed ``Conversation``, ``Agent`` and ``ContextCompressor`` consult (the
operations and where they happen are listed with that protocol). It depends
only on what a decision needs: the policy, a clock, the consent registry
(read-only: :meth:`ConsentLookup.is_granted`), the audit sink, the workspace
and the store factory of its agents. It builds none of them and writes
nothing itself but the audit entries and, through the store it is handed,
the blocks it allows. ``Governance`` (``_root``) builds one from settings and
delegates its gate methods to it; a PolicyGate can also be built on its own,
with fakes from ``governed_memory.testing``.
"""

from __future__ import annotations

import fnmatch
import hashlib
import logging
import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from .._base import Clock, SystemClock
from .._errors import ConsentRequiredError
from .._policy import (
    Allowed,
    AuditSink,
    Decision,
    MissingConsent,
    NullAuditSink,
    Operation,
    Outcome,
    Policy,
    Skip,
    SummarizationFallback,
    SummarizerDecision,
    UseLocal,
    is_local_model,
)
from .._stores import AgentStore, PlaintextAgentStore, StoreFactory

if TYPE_CHECKING:
    from .._protocols import ErasureWatch, SubjectRecord, WriteGuard

__all__ = ["ConsentLookup", "PolicyGate"]

logger = logging.getLogger("governed_memory")

_R = TypeVar("_R", bound="SubjectRecord")
_PERSIST = Operation.PERSIST.purpose  # the purpose a write needs consent for
_PERSIST_OP = Operation.PERSIST.value
_GUARDED_TRIES = 3  # consent guards tried in a row before appending on a plain read


class ConsentLookup(Protocol):
    """What the gate reads of the consent registry (``ConsentRegistry`` is one)."""

    def is_granted(self, subject_id: str, purpose: str) -> bool:
        """Whether ``subject_id`` currently consents to ``purpose``."""
        ...


@dataclass
class _Warned:
    keys: set[tuple[str | None, str | None, str]] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)


def _no_erasure_watch(agent: str) -> ErasureWatch | None:
    return None


class PolicyGate:
    """The consent gate of one policy: decide, run, audit.

    Args:
        policy: the policy every decision is made under.
        consent: where consent is looked up (a ``ConsentRegistry``).
        workspace: the governed workspace (agents keep their MEMORY.md there).
        clock: the time of decisions (default: the system clock).
        audit: where decisions and operations are recorded (default:
            :class:`NullAuditSink`, which records nothing).
        store_factory: builds the store of one agent's MEMORY.md (default:
            the plaintext store on this gate's clock).
        erasure_watch: the erasure watch a live Conversation of an agent
            keeps (default: none).

    The collaborators are public attributes (``policy``, ``consent``,
    ``clock``, ``audit``, ``workspace``): a Governance replaces them when its
    own are replaced, and the next decision uses them.
    """

    def __init__(
        self,
        *,
        policy: Policy,
        consent: ConsentLookup,
        workspace: str | Path,
        clock: Clock | None = None,
        audit: AuditSink | None = None,
        store_factory: StoreFactory | None = None,
        erasure_watch: Callable[[str], ErasureWatch | None] | None = None,
    ) -> None:
        self.policy = policy
        self.consent = consent
        self.workspace = Path(workspace)
        self.clock: Clock = clock or SystemClock()
        self.audit: AuditSink = audit if audit is not None else NullAuditSink()
        self._store_factory = store_factory
        self._erasure_watch = erasure_watch or _no_erasure_watch
        self._warned = _Warned()
        self._allowed: tuple[Policy, bool, dict[str, Any]] | None = None  # see _allowed_attrs

    def store_factory(self, memory_path: Path, header: Callable[[], str]) -> AgentStore:
        """Build the store for one agent's MEMORY.md (the factory given, else plaintext)."""
        if self._store_factory is not None:
            return self._store_factory(memory_path, header)
        return PlaintextAgentStore(memory_path, header, clock=self.clock)

    def erasure_watch(self, agent: str) -> ErasureWatch | None:
        """The watch a live Conversation of ``agent`` keeps on erasures (None: none to keep)."""
        return self._erasure_watch(agent)

    def left_out(self, subjects: Iterable[str]) -> set[str]:
        """Which of ``subjects`` a summary must leave out: those without ``persist`` consent.

        Only under ``summarization.without_consent = "leave_out"`` (else none:
        ``consent.on_missing`` decides about the whole compaction). Their
        turns stay in the history, unsummarised, and never reach disk.
        """
        purpose = Operation.COMPACT.purpose
        if (
            self.policy.summarization.without_consent != "leave_out"
            or purpose not in self.policy.consent.required_for
        ):
            return set()
        return {s for s in subjects if not self.consent.is_granted(s, purpose)}

    @property
    def isolates_subjects(self) -> bool:
        """Whether the policy gives each data subject a memory of their own (``memory.isolation``)."""
        return self.policy.memory.isolation == "subject"

    # -- the decision ----------------------------------------------------

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
        # Logs leave the governed workspace (aggregators, support tickets): the
        # warning names the subject by its keyed hash, as the audit trail does.
        self._warn_once(
            agent,
            subject_id,
            purpose,
            why
            if subject_id is None
            else f"subject {self.subject_ref(subject_id)} has not granted (or has withdrawn) "
            f"'{purpose}' consent",
        )
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
        audit = self.audit
        needs_consent = _PERSIST in self.policy.consent.required_for
        if type(audit) is NullAuditSink and not needs_consent:
            # Hot path (every add): nothing to check, nothing to record.
            store.append(block)
            return True
        guard = None  # the consent write's guard, when allowed on the cached read
        if needs_consent:
            # A store whose write checks the cached grant itself: nothing read first.
            checks = "append_guarded" if type(audit) is NullAuditSink else "append_audited"
            if subject_id is not None and hasattr(store, checks):
                guard = self._consent_guard(subject_id)
            if guard is None and (
                subject_id is None or not self.consent.is_granted(subject_id, _PERSIST)
            ):
                return self._persist_decided(store, block, agent=agent, subject_id=subject_id)
            # Allowed (every add of a consenting subject): what check() decides and
            # the audit records, without building the Decision.
            self._warned.keys.discard((agent, subject_id, _PERSIST))  # warn again on a withdrawal
        if type(audit) is NullAuditSink:
            if needs_consent and subject_id is not None:
                if not self._append_on_consent(store, block, subject_id):
                    return self._persist_decided(store, block, agent=agent, subject_id=subject_id)
                return True
            store.append(block)
            return True
        attrs = self._allowed_attrs(needs_consent, block)
        try:
            if self._persist_joined(store, block, agent, subject_id, attrs, guard):
                return True
            # Not joined: appended on the consent as last read, the write checking
            # that it still holds; withdrawn since, decided again on a new read.
            if needs_consent and subject_id is not None:
                stale = not self._append_on_consent(store, block, subject_id)
            else:
                stale = False
                store.append(block)
        except BaseException as exc:
            audit.record(
                _PERSIST_OP,
                agent=agent,
                subject_id=subject_id,
                outcome="error",
                error=type(exc).__name__,
                **attrs,
            )
            raise
        if stale:  # withdrawn since the cached read: decided again, on this read
            return self._persist_decided(store, block, agent=agent, subject_id=subject_id)
        audit.record(_PERSIST_OP, agent=agent, subject_id=subject_id, outcome="ok", **attrs)
        return True

    def _consent_guard(self, subject_id: str) -> WriteGuard | None:
        """The guard of a write ``subject_id``'s cached ``persist`` grant allows (or None).

        A database store checks it in the write's own transaction, so the add
        reads nothing first: it commits only if the consent log is unchanged
        since the grant was read. None when the registry cannot give one (the
        file place, nothing read yet, no grant cached): read consent then.
        """
        granted_guard = getattr(self.consent, "granted_guard", None)
        if granted_guard is None:
            return None
        guard: WriteGuard | None = granted_guard(subject_id, _PERSIST)
        return guard

    def _persist_joined(
        self,
        store: AgentStore,
        block: str,
        agent: str | None,
        subject_id: str | None,
        attrs: dict[str, Any],
        guard: WriteGuard | None,
    ) -> bool:
        """Append ``block`` and record it in one write, when the store and the log can.

        A database store appends the block and the ``persist`` entry in one
        transaction (``append_audited``), so no block is ever stored without
        its entry; ``guard`` (the consent read's) is checked in it too. False
        when they cannot, or the guard failed (nothing was done).
        """
        joined = getattr(store, "append_audited", None)
        record_with = getattr(self.audit, "record_with", None)
        if joined is None or record_with is None:
            return False
        done: bool = record_with(
            _PERSIST_OP,
            lambda log, event, clean: joined(block, log, event, clean, also=guard),
            agent=agent,
            subject_id=subject_id,
            outcome="ok",
            **attrs,
        )
        return done

    def _append_on_consent(self, store: AgentStore, block: str, subject_id: str) -> bool:
        """Append ``block`` while ``subject_id``'s persist consent is as last read (granted).

        A store that can check a consent guard in its own write
        (``append_guarded``: the database's) appends only if the consent log is
        unchanged since that read, so a withdrawal committed by any host before
        the write stops it; when the guard no longer holds, consent is read
        again. False, with nothing written, when that read finds it withdrawn.
        Elsewhere (files) the caller's read just before is the check.
        """
        appender = getattr(store, "append_guarded", None)
        if appender is None:
            store.append(block)
            return True
        for _ in range(_GUARDED_TRIES):
            guard = self._consent_guard(subject_id)
            if guard is not None:
                done = appender(block, guard)
                if done:
                    return True
                if done is None:  # another database's guard: checked by a read instead
                    if not self.consent.is_granted(subject_id, _PERSIST):
                        return False
                    store.append(block)
                    return True
            if not self.consent.is_granted(subject_id, _PERSIST):
                return False  # withdrawn since the read the write was allowed on
        store.append(block)  # (granted on the read just made; the log kept changing)
        return True

    def _persist_decided(
        self, store: AgentStore, block: str, *, agent: str | None, subject_id: str | None
    ) -> bool:
        """:meth:`persist` through :meth:`check`: missing consent (memory only, or refused)."""
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

    def _allowed_attrs(self, needs_consent: bool, block: str) -> dict[str, Any]:
        """The audit attributes of an allowed persist: the decision's, then the block's size.

        The decision's part is made once per policy (the policy attribute may
        be replaced: then it is made again).
        """
        policy = self.policy
        made = self._allowed
        if made is None or made[0] is not policy or made[1] is not needs_consent:
            reason = "consent granted" if needs_consent else "no consent required"
            decided = {
                "purpose": _PERSIST,
                "decision": Outcome.PERSIST.value,
                "policy_id": policy.id,
                "policy_version": policy.version,
                "reason": reason,
            }
            made = self._allowed = (policy, needs_consent, decided)
        attrs = {**made[2], "bytes": len(block.encode("utf-8"))}
        if policy.audit.include_content:
            attrs["content"] = _block_content(block)
        return attrs

    def _block_attrs(self, block: str | None) -> dict[str, Any]:
        """Size (and, only under ``audit.include_content``, the text) of a block, for the audit."""
        if block is None or type(self.audit) is NullAuditSink:
            return {}
        attrs: dict[str, Any] = {"bytes": len(block.encode("utf-8"))}
        if self.policy.audit.include_content:
            attrs["content"] = _block_content(block)
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
    ) -> str | None:
        """Archive and replace the memory if the gate allows; return the archive's id.

        The summary in ``first_block`` is derived from every subject its
        lineage names, so each of them needs the consent a write needs, not
        only ``subject_id`` (:meth:`lineage_consent`). Under ``memory_only``
        the disk is left as it is (the in-memory history is still compacted
        by the caller); under ``deny`` :class:`ConsentRequiredError` is raised
        before anything is written. A conversation without a subject cannot
        compact under a policy that needs ``persist`` consent: in memory only,
        its stored records would stay on disk beside a history that no longer
        holds them, so :class:`ConsentRequiredError` is raised and nothing
        changes.
        """
        self._refuse_unattributed(agent, subject_id)
        lacking = self.lineage_consent(first_block, agent=agent, subject_id=subject_id)
        if lacking is not None:
            for op in (Operation.ARCHIVE, Operation.COMPACT):
                self._audit_decision(replace(lacking, operation=op.value), "memory_only")
            return None
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

    def _refuse_unattributed(self, agent: str | None, subject_id: str | None) -> None:
        purpose = Operation.COMPACT.purpose
        if subject_id is not None or purpose not in self.policy.consent.required_for:
            return
        why = (
            "the conversation has no subject_id, so no 'persist' consent can cover its "
            "summary, and compacting it in memory only would leave the stored records on "
            "disk out of step with the history"
        )
        self.audit.record(
            Operation.COMPACT.value,
            agent=agent,
            subject_id=None,
            outcome="denied",
            **self._policy_attrs(purpose, why),
        )
        raise ConsentRequiredError(
            f"compaction refused under policy {self.policy.id} v{self.policy.version}: {why}; "
            "nothing was changed, in memory or on disk. Give the Conversation a subject_id= "
            "(one conversation per data subject), or use a policy without 'persist' in "
            "consent.required_for",
            subject_id=None,
            purpose=purpose,
            operation=Operation.COMPACT.value,
        )

    def lineage_consent(
        self, first_block: str | None, *, agent: str | None, subject_id: str | None
    ) -> Decision | None:
        """None when every subject in the summary's lineage may be persisted, else the decision.

        ``subject_id`` (the conversation's subject) is left to the archive
        decision. A subject without ``persist`` consent (never given, or
        withdrawn) gives a :attr:`Outcome.MEMORY_ONLY` decision, logged once
        per agent and subject with the subject's keyed hash, never its id;
        under ``on_missing = "deny"`` the refusal is audited and raised.

        Raises:
            ConsentRequiredError: a lineage subject lacks consent and the policy denies.
        """
        purpose = Operation.COMPACT.purpose
        if first_block is None or purpose not in self.policy.consent.required_for:
            return None
        missing = [
            s
            for s in _block_lineage(first_block)
            if s != subject_id and not self.consent.is_granted(s, purpose)
        ]
        if not missing:
            return None
        refs = [self.subject_ref(s) for s in missing]
        why = (
            f"the summary is derived from the messages of {len(missing)} subject(s) "
            f"({', '.join(refs)}) without '{purpose}' consent"
        )
        if self.policy.consent.on_missing is MissingConsent.DENY:
            self.audit.record(
                Operation.COMPACT.value,
                agent=agent,
                subject_id=missing[0],
                outcome="denied",
                **self._policy_attrs(purpose, why),
            )
            raise ConsentRequiredError(
                f"compaction refused under policy {self.policy.id} v{self.policy.version}: "
                f"{why}; nothing was changed. Record their consent (`governed-memory consent "
                f"grant --subject <id> --purpose {purpose}`), or summarise only the messages "
                "of subjects who consented, or use a policy with consent.on_missing = "
                "'memory_only'",
                subject_id=missing[0],
                purpose=purpose,
                operation=Operation.COMPACT.value,
            )
        key = (agent, "lineage:" + ",".join(refs), purpose)
        with self._warned.lock:
            first = key not in self._warned.keys
            self._warned.keys.add(key)
        if first:
            logger.warning(
                "governed_memory: %s; agent %s keeps the compaction in memory only and leaves "
                "its stored memory as it is (policy %s v%s, consent.on_missing = "
                "'memory_only').",
                why,
                agent or "<none>",
                self.policy.id,
                self.policy.version,
            )
        return self._decision(
            Operation.COMPACT, Outcome.MEMORY_ONLY, agent, missing[0], purpose, why
        )

    def subject_ref(self, subject_id: str) -> str:
        """How a warning names ``subject_id``: its keyed hash, as the audit trail records it.

        The audit trail's ``subject.hash`` (HMAC-SHA-256 under the audit key)
        when the audit sink offers one, so an auditor can find the entries;
        otherwise ``sha256:`` and the first 16 hex digits of SHA-256 over
        ``subject\\0<id>`` (stable, but not keyed: guessable ids can be tried).
        """
        sink: object = self.audit
        for _ in range(4):  # through wrapping sinks (the policy.load announcer)
            hasher = getattr(sink, "subject_hash", None)
            if callable(hasher):
                try:
                    return f"subject.hash {hasher(subject_id)}"
                except Exception:  # a sink without a usable key: the plain hash
                    break
            sink = getattr(sink, "sink", None)
            if sink is None:
                break
        digest = hashlib.sha256(b"subject\x00" + subject_id.encode("utf-8", "surrogatepass"))
        return "sha256:" + digest.hexdigest()[:16]

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
        subjects = tuple(subjects)  # read twice: the consent check and the audit entry
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
                # The reason reaches logs (the compressor's): keyed hashes, never ids.
                named = [s if s == "<no subject>" else self.subject_ref(s) for s in missing]
                reason = (
                    f"subjects {named} have not granted 'summarize' consent "
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
            # Keyed hashes of whose turns the transcript holds: a subject's access
            # export lists the external models that received their data (Art. 15(1)(c)).
            subjects=sorted({s for s in subjects if s is not None}),
            **self._policy_attrs("summarize", reason or "allowed by the policy"),
        )
        return result


def _block_content(block: str) -> str:
    """The content of a block's first record (the block itself when it holds none)."""
    from .._format import parse_memory

    records = parse_memory(block).records
    return records[0].content if records else block


def _block_lineage(block: str) -> list[str]:
    """The lineage a summary block's metadata names (empty for any other block)."""
    from .._format import parse_memory, record_lineage

    return [s for record in parse_memory(block).records for s in record_lineage(record)]


def _matches(model: str, patterns: Iterable[str]) -> bool:
    return any(fnmatch.fnmatchcase(model, pattern) for pattern in patterns)


if TYPE_CHECKING:
    from .._protocols import ConsentGate

    def _is_a_consent_gate(gate: PolicyGate) -> ConsentGate[AgentStore]:
        return gate  # checked by mypy, never run: a PolicyGate is a ConsentGate
