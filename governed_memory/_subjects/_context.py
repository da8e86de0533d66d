"""What subject requests need from a workspace, from a Governance or a bare path.

Export and erasure run from the CLI, from the scheduler and from a governed
Conversation. They all go through a :class:`SubjectContext`: the workspace,
the governance folder, the store factory (plaintext or encrypted, so every
read and rewrite goes through the :class:`~governed_memory.AgentStore`
protocol), the clock, the policy, the audit sink, and the optional
collaborators that exist only in some deployments: the consent registry, the
legal-hold registry, the key ring (crypto-shredding), the audit log reader and
the record sealing that keeps tombstones and holds encrypted at rest.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from .._base import (
    AGENTS_DIR,
    EXPORTS_DIR,
    GOVERNANCE_DIR,
    Clock,
    SystemClock,
    resolve_workspace,
    validate_agent_name,
)
from .._format import render_header
from .._policy import DEFAULT_POLICY, NullAuditSink, Policy
from .._protocols import MemoryBackend, RecordPlace
from .._records import HoldRegistry, RequestRegister, TombstoneStore, sign_receipt
from .._stores import (
    AgentFolderStore,
    AgentStore,
    FileMemoryBackend,
    PlaintextAgentStore,
    StoreFactory,
)

if TYPE_CHECKING:
    from .._crypto import RecordSealing, SigningKeyProvider
    from .._governance import AuditSink, Governance

__all__ = [
    "KeyShredder",
    "SubjectContext",
    "Walk",
    "acting_as",
    "partition_of",
    "subject_context",
]


def _no_signing_key() -> SigningKeyProvider | None:
    return None


class KeyShredder(Protocol):
    """Destroys data keys (crypto-shredding) in an encrypted workspace."""

    def shred_subject(self, subject: str) -> Any:
        """Destroy every key of ``subject``."""
        ...

    def shred_agent(self, agent: str) -> Any:
        """Destroy every key of ``agent``."""
        ...


@dataclass(frozen=True)
class Walk:
    """The memories a request goes through in one agent (its own first), and whether that is all."""

    memories: list[AgentStore]
    complete: bool
    """True: every memory of the agent (no index, or a whole agent); False: those the index allows."""

    @property
    def partitions(self) -> list[str] | None:
        """The subject folders visited; None: all of them (where links are looked for)."""
        return None if self.complete else [m.partition or "" for m in self.memories[1:]]


def partition_of(store: AgentStore, subject: str) -> str | None:
    """The name of ``subject``'s memory on the agent whose own store is ``store``.

    Asked only once the agent has subject memories: an encrypted workspace
    then has its keyring, so naming the folder (a keyed reference) writes
    nothing, and opening the store creates nothing.
    """
    memory = store.subject_store(subject)
    try:
        return memory.partition
    finally:
        memory.close()


@dataclass
class SubjectContext:
    """Everything export and erasure use; build it with :func:`subject_context`."""

    workspace: Path
    governance_dir: Path | RecordPlace
    """Where the registries keep their records: the governance folder, or a database's record place."""
    clock: Clock
    policy: Policy
    store_factory: StoreFactory
    audit: AuditSink
    consent: Any = None
    holds: HoldRegistry | None = None
    keys: KeyShredder | None = None
    audit_entries: Callable[[str | None, str | None], list[dict[str, Any]]] | None = None
    encrypted: bool = False
    sealing: RecordSealing | None = None
    memory: MemoryBackend | None = None
    """Where the agents are (default: the workspace's ``agents/`` folders, via ``store_factory``)."""
    pseudonym: Callable[[str, str], str] | None = None
    """The audit trail's keyed hash of a (kind, value), e.g. ("agent", "A"); None without an audit key."""
    signing_key: Callable[[], SigningKeyProvider | None] = _no_signing_key
    """The key that signs receipts, asked for when one is written (None: unsigned)."""
    where: str | None = None
    """The deployment's storage, for messages (``PostgreSQL at host:port/db``); None: the workspace."""

    def check_signing(self, what: str) -> None:
        """Refuse ``what`` before anything is written when its receipt could not be signed.

        A configured key is read here too, so a malformed or exposed key file
        stops the operation before its first write, not at its receipt.

        Raises:
            ConfigurationError: the policy sets ``evidence.require_signing``
                and no signing key is configured (naming the fix).
            KeyProviderError: the configured key is malformed or its file exposed.
        """
        if self.signing_key() is None and self.policy.evidence.require_signing:
            from .._governance import missing_signing_key

            raise missing_signing_key(self.policy, what)

    def sign_receipt(self, body: dict[str, Any]) -> dict[str, Any]:
        """``body``, a complete receipt, as it must be stored: signed with the deployment's key.

        Every operation's receipt goes through here right before it is
        written (erasure, rectification, export): signed when a key is
        configured, unsigned otherwise, refused when the policy requires
        signing and there is no key (see :meth:`check_signing`).
        """
        self.check_signing("the operation")
        return sign_receipt(body, self.signing_key())

    @property
    def agents_dir(self) -> Path:
        return self.workspace / AGENTS_DIR

    @property
    def exports_dir(self) -> Path | None:
        """The governance folder's ``exports/``, which retention keeps in check; None on a database.

        A database deployment keeps no governance folder: an export bundle is
        written where the caller asks, and only its receipt is stored (in the
        record place).
        """
        if isinstance(self.governance_dir, Path):
            return self.governance_dir / EXPORTS_DIR
        return None

    @property
    def agents_where(self) -> str:
        """Where the agents are, for messages: the ``agents/`` folder, or the database."""
        if self.on_files or self.where is None:
            return str(self.agents_dir)
        return self.where

    def no_agent(self, agent: str) -> str:
        """The start of the message for an agent that has no memory (a folder in the file backend)."""
        kind = "folder" if self.on_files else "memory"
        return f"agent {agent!r} has no {kind} in {self.agents_where}"

    @property
    def backend(self) -> MemoryBackend:
        """Where the agents' memory is: ``memory`` when given, else the workspace's folders."""
        if self.memory is None:
            self.memory = FileMemoryBackend(self.workspace, self.store_factory)
        return self.memory

    @property
    def on_files(self) -> bool:
        """Whether the agents are the workspace's folders (links can be there to report)."""
        return isinstance(self.backend, FileMemoryBackend)

    def agent_names(self) -> list[str]:
        """The agents that have memory, sorted (folders with invalid names are not agents)."""
        return self.backend.agents()

    def has_agent(self, agent: str) -> bool:
        return self.backend.has_agent(agent)

    def tombstones(self) -> TombstoneStore:
        """The erasure records of the workspace (sealed when the workspace is encrypted)."""
        return TombstoneStore(self.governance_dir, sealing=self.sealing)

    def requests(self) -> RequestRegister:
        """The request register (sealed when the workspace is encrypted), auditing each change.

        Every change is recorded through :attr:`audit` (``request.*``) with its
        actor; the subject as ``subject.hash``, never in clear.
        """
        return RequestRegister(
            self.governance_dir, clock=self.clock, sealing=self.sealing, on_event=self._audited
        )

    def _audited(self, event: str, attrs: Any) -> None:
        values = dict(attrs)
        subject = values.pop("subject", None)
        self.audit.record(
            event,
            agent=None,
            subject_id=subject,
            outcome=values.pop("outcome", None) or "ok",
            **values,
            policy_id=self.policy.id,
            policy_version=self.policy.version,
        )

    def open_store(self, agent: str) -> AgentStore:
        """The store of one agent (opening it creates nothing)."""
        return self.backend.open(agent, lambda: render_header(f"{agent}_conversation", self._now()))

    def stores(self, only: str | None = None) -> Iterator[tuple[str, AgentStore]]:
        """(name, store) for every agent, or for ``only``; each store is closed after use."""
        names = self.agent_names() if only is None else [validate_agent_name(only)]
        for name in names:
            if not self.has_agent(name):
                continue
            store = self.open_store(name)
            try:
                yield name, store
            finally:
                store.close()

    def memories_of(self, store: AgentStore) -> Iterator[AgentStore]:
        """The agent's own ``store``, then each of its subject memories, each under its lock.

        A subject's records may be in any of them: the agent's memory and
        archives from before isolation, the subject's own memory, another
        subject's summary whose lineage names them. The agent's lock is held
        throughout and each subject's is taken inside it (the order
        ``isolate_subjects`` keeps), so a record moved from the agent's memory
        to a subject's meanwhile is neither seen twice nor missed, and no
        erasure deletes a subject folder under the walk (it holds the agent's
        lock to do so). Each subject store is closed after its turn.
        """
        with store.lock():
            yield store
            for memory in store.subject_stores():
                try:
                    with memory.lock():
                        yield memory
                finally:
                    memory.close()

    @contextmanager
    def memories_for(self, store: AgentStore, subject: str | None) -> Iterator[Walk]:
        """The memories of the agent that may hold ``subject``'s data, each locked, in a :class:`Walk`.

        Call it under the agent's lock. The agent's own ``store`` first,
        then, when the agent's lineage index is known
        (:meth:`~governed_memory._stores.AgentFolderStore.lineage_index`),
        only the subject's own memory and those the index lists: nothing of
        another subject is read. Without an index (or without ``subject``:
        a whole agent), every subject memory, and ``complete`` is True. Each
        subject memory is locked inside the agent's lock (the order of
        :meth:`memories_of`) and closed after the block.
        """
        index = None
        if subject is not None and isinstance(store, AgentFolderStore):
            index = store.lineage_index()
        complete = index is None
        subs: list[AgentStore] = []
        if index is None:
            subs += store.subject_stores()
        else:
            assert isinstance(store, AgentFolderStore) and subject is not None
            own = partition_of(store, subject)
            subs += store.subject_stores(only=index | ({own} if own else set()))
        with ExitStack() as stack:
            for memory in subs:
                stack.callback(memory.close)
            for memory in subs:
                stack.enter_context(memory.lock())
            yield Walk([store, *subs], complete)

    def _now(self) -> str:
        return self.clock.now().isoformat()

    def source(self, store: AgentStore, archive_id: str | None = None) -> str:
        """Where the store keeps its memory (None) or an archive, relative to the workspace.

        As receipts and exports cite it: ``agents/<name>/MEMORY.md``,
        ``agents/<name>/archive/history_<ts>.md`` in the file backend; a
        subject memory's ``agents/<name>/subjects/<p>/MEMORY.md`` (``<p>`` a
        hash of the subject id, keyed in an encrypted workspace).
        """
        return f"{AGENTS_DIR}/{store.agent}/{store.source(archive_id)}"

    def relative(self, path: Path) -> str:
        """``path`` relative to the workspace, with ``/`` separators."""
        try:
            return Path(path).relative_to(self.workspace).as_posix()
        except ValueError:
            return Path(path).as_posix()


def subject_context(target: Governance | SubjectContext | str | os.PathLike[str]) -> SubjectContext:
    """A :class:`SubjectContext` for a Governance, or for a plain workspace folder.

    A plain folder gets the default policy, the system clock and the plaintext
    store; an encrypted workspace needs a Governance (it holds the keys).
    """
    if isinstance(target, SubjectContext):
        return target
    if isinstance(target, str | os.PathLike):
        workspace = resolve_workspace(target)
        clock = SystemClock()

        def plaintext(path: Path, header: Callable[[], str]) -> AgentStore:
            return PlaintextAgentStore(path, header, clock=clock)

        return SubjectContext(
            workspace=workspace,
            governance_dir=workspace / GOVERNANCE_DIR,
            clock=clock,
            policy=DEFAULT_POLICY,
            store_factory=plaintext,
            audit=NullAuditSink(),
            consent=_consent_registry(workspace / GOVERNANCE_DIR),
            holds=HoldRegistry(workspace / GOVERNANCE_DIR, clock=clock),
        )
    return _from_governance(target)


def acting_as(
    target: Governance | SubjectContext | str | os.PathLike[str], actor: str
) -> SubjectContext:
    """``target`` for one operator: every audit entry its operations record names ``actor``.

    For a front end acting for a signed-in user (the console), as the CLI's
    ``--actor`` does: export, erasure, rectification and the request register
    record ``actor.hash`` in each entry that names no actor of its own. Pass
    the result wherever a Governance is taken (``export_subject(acting_as(gov,
    who), ...)``); ``rectify`` then needs ``gate=gov`` to regenerate summaries
    with a non-local model.

    Raises:
        ConfigurationError: ``actor`` is blank.
    """
    from dataclasses import replace

    from .._audit import ActorSink
    from .._errors import ConfigurationError

    if not isinstance(actor, str) or not actor.strip():
        raise ConfigurationError(
            f"actor {actor!r} is blank; name who acts (e.g. 'console:alice'), as the audit "
            "log records it"
        )
    ctx = subject_context(target)
    return replace(ctx, audit=ActorSink(ctx.audit, actor))


def _consent_registry(governance_dir: Path) -> Any:
    from .._records import ConsentRegistry

    return ConsentRegistry(governance_dir)


def _audit_key(gov: Governance) -> Any:
    """The audit key (an ``AuditKey``), or None without an audit log or a configured key."""
    if not gov.policy.audit.enabled:
        return None
    from .._audit import audit_key_from_settings

    return audit_key_from_settings(gov.settings)


def _pseudonym(gov: Governance) -> Callable[[str, str], str] | None:
    key = _audit_key(gov)
    return None if key is None else key.pseudonym


def _audit_reader(
    gov: Governance,
) -> Callable[[str | None, str | None], list[dict[str, Any]]] | None:
    """Entries of the audit log about a subject (or agent), found by their keyed hash.

    None when the policy keeps no audit log or no audit key is configured
    (the entries name subjects only by a hash of the key).
    """
    key = _audit_key(gov)
    if key is None:
        return None
    # The deployment's log, as the storage keeps it (read only: no verification, no write).
    log = gov.storage.audit_storage(
        gov.policy.audit.log_dir, key, previous_keys=(), clock=gov.clock
    )

    def about(subject: str | None, agent: str | None) -> list[dict[str, Any]]:
        wanted = (
            key.pseudonym("subject", subject)
            if subject is not None
            else key.pseudonym("agent", agent or "")
        )
        found = []
        for entry in log.entries():
            values: set[str] = set()
            for name, value in entry.attrs.items():
                if name.endswith(".hash") and isinstance(value, str):
                    values.add(value)
                elif name.endswith(".hashes") and isinstance(value, list):
                    values.update(v for v in value if isinstance(v, str))
            if wanted in values:
                found.append(entry.to_dict())
        return found

    return about


def _from_governance(gov: Governance) -> SubjectContext:
    return SubjectContext(
        # The files the file storage keeps (links are looked for there); the
        # Governance's own folder for a database, which keeps no files.
        workspace=gov.storage.files or gov.workspace,
        governance_dir=gov.records,
        clock=gov.clock,
        policy=gov.policy,
        store_factory=gov.store_factory,
        memory=gov.memory_backend,
        audit=gov.audit,
        consent=gov.consent,
        holds=getattr(gov, "holds", None)
        or HoldRegistry(gov.records, clock=gov.clock, sealing=gov.sealing),
        # The keyring crypto-shreds (a KeyShredder); built only when encryption is on.
        keys=gov.keyring if gov.policy.encryption.enabled else None,
        audit_entries=_audit_reader(gov),
        pseudonym=_pseudonym(gov),
        encrypted=gov.policy.encryption.enabled,
        sealing=gov.sealing,
        # Read when a receipt is signed: opening a Conversation reads no key file.
        signing_key=lambda: gov.signer,
        where=gov.storage.where,
    )
