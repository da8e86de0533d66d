"""Retention for one workspace: plan, purge (journaled), dry runs and ``as_of``.

:class:`Retention` is the shell around the pure planner: it reads the clock
once (or takes ``as_of``), scans the workspace once, and applies the plan
through a journal (see ``_journal``) under a per-workspace purge lock::

    Retention(governance).purge()                      # what the policy requires now
    Retention(governance).purge(dry_run=True)          # the same, nothing deleted
    Retention(governance).purge(as_of=dt.datetime(2027, 1, 1), dry_run=True)

``as_of`` moves the planning clock; the clock (``governance.clock``) stays
the real time. A purge that deletes refuses an ``as_of`` later than the
clock's now (:class:`PurgeInFutureError`): only a dry run may look ahead.
An ``as_of`` in the past is allowed for a real purge: every maximum age is
then counted to that earlier moment, so it deletes only what was already
due then (a subset of what is due now), and the floors (``audit_min_age``)
are measured from the clock's now, never from ``as_of``.

A purge that finds nothing to delete writes nothing at all (the default
policy keeps everything forever, and a default workspace stays as the
reference leaves it).

On a deployment that keeps no files (a database: ``storage.files`` is None)
the same planner and holds run over what ``_deployment`` scans through the
storage seam; the plan goes to the storage's :class:`PurgeJournal`
(``storage.purge_journal("purge")``), the purge lock is the storage's
:class:`Leadership` ``"purge"`` (one purge at a time across every host), and
the receipt is a document of the record place (``purge/receipts/<id>.json``).
"""

from __future__ import annotations

import datetime as _dt
import json
import secrets
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .._base import FileLock
from .._errors import ConfigurationError, PurgeInFutureError, PurgeInProgressError, StorageError
from .._records import HoldRegistry, JsonDocument
from ._deployment import StoredJournal, StoreExecutor, scan_deployment
from ._execute import Executor, Tally
from ._journal import Journal, remove_stale_progress, write_journal
from ._plan import Plan, PlanItem, iter_plan, plan
from ._scan import scan_workspace
from ._state import WorkspaceState

if TYPE_CHECKING:
    from .._governance import Governance
    from .._policy import Policy
    from .._protocols import AuditStorage, Leadership, PurgeJournal, RecordPlace

__all__ = [
    "PurgeInFutureError",
    "PurgeInProgressError",
    "PurgeReport",
    "Retention",
    "audit_dir_of",
    "to_local",
]

PURGE_DIR = "purge"
RECEIPTS_DIR = "receipts"
RECEIPT_FORMAT_VERSION = 1
FUTURE_SLACK = _dt.timedelta(seconds=1)
"""How far past the clock's now a real purge's ``as_of`` may be (clock jitter only)."""


def to_local(when: _dt.datetime) -> _dt.datetime:
    """``when`` as naive local time (aware times are converted, naive ones kept)."""
    return when.astimezone().replace(tzinfo=None) if when.tzinfo is not None else when


def audit_dir_of(governance: Governance) -> Path:
    """Where the audit log's segments live (``audit.log_dir``, else ``<governance>/audit``)."""
    from .._audit import audit_log_dir

    return audit_log_dir(governance.policy, governance.file_workspace)


@dataclass(frozen=True)
class PurgeReport:
    """What a purge deleted (or, for a dry run, would delete) and what it kept.

    ``deleted`` and ``held`` count artefacts per rule. ``gone`` were already
    deleted (by an interrupted run or someone else), ``changed`` were written
    again after planning, ``failed`` could not be deleted (``errors`` says
    which). ``resumed`` is the id of an interrupted purge finished first;
    ``discarded`` the id of one dropped because the policy changed since.
    """

    purge_id: str | None
    as_of: _dt.datetime
    policy_id: str
    policy_version: str
    dry_run: bool
    deleted: dict[str, int]
    bytes_freed: int
    held: dict[str, int]
    held_bytes: int
    gone: int = 0
    changed: int = 0
    failed: int = 0
    errors: tuple[str, ...] = ()
    resumed: str | None = None
    discarded: str | None = None
    pending_journal: int = 0
    plan: Plan | None = field(default=None, repr=False, compare=False)

    @property
    def total_deleted(self) -> int:
        return sum(self.deleted.values())

    @property
    def total_held(self) -> int:
        return sum(self.held.values())

    def to_dict(self) -> dict[str, Any]:
        """The report as JSON-ready data (no plan items)."""
        return {
            "purge_id": self.purge_id,
            "as_of": self.as_of.isoformat(),
            "policy_id": self.policy_id,
            "policy_version": self.policy_version,
            "dry_run": self.dry_run,
            "deleted": self.deleted,
            "total_deleted": self.total_deleted,
            "bytes_freed": self.bytes_freed,
            "held": self.held,
            "total_held": self.total_held,
            "held_bytes": self.held_bytes,
            "already_gone": self.gone,
            "changed_since_planned": self.changed,
            "failed": self.failed,
            "errors": list(self.errors),
            "resumed": self.resumed,
            "discarded": self.discarded,
            "pending_journal_entries": self.pending_journal,
        }


class _PurgeLock:
    """The workspace's purge lock, taken lazily (so a no-op purge creates nothing).

    The file backend of :class:`Leadership` for purges: an ``flock`` on
    ``<governance>/purge/lock``, one purge at a time per workspace.
    """

    def __init__(self, folder: Path, workspace: Path) -> None:
        self.folder = folder
        self.workspace = workspace
        self._lock = FileLock(folder / "lock")
        self.fd: int | None = None

    def try_acquire(self) -> bool:
        """Take the lock if free (without waiting); whether this instance holds it.

        Raises:
            StorageError: the lock file cannot be created.
        """
        if self.fd is not None:
            return True
        try:
            fd = self._lock.acquire(blocking=False)
        except OSError as exc:
            raise StorageError(f"cannot create the purge lock in {self.folder}: {exc}") from exc
        if fd is None:
            return False
        self.fd = fd
        remove_stale_progress(self.folder)
        return True

    def acquire(self) -> None:
        """Take the lock, or raise :class:`PurgeInProgressError` when another purge holds it."""
        if not self.try_acquire():
            raise PurgeInProgressError(
                f"another purge is running on workspace {self.workspace} (it holds "
                f"{self._lock.path}); wait for it to finish and run again"
            )

    @property
    def held(self) -> bool:
        return self.fd is not None

    def release(self) -> None:
        if self.fd is not None:
            self._lock.release(self.fd)
            self.fd = None


class Retention:
    """Plans and applies the retention rules of ``governance.policy`` to its workspace.

    Args:
        governance: policy, workspace, clock, store factory and audit sink.
        holds: the legal-hold registry (default: the one in the governance folder).
    """

    def __init__(self, governance: Governance, *, holds: HoldRegistry | None = None) -> None:
        self.governance = governance
        self.holds = holds or HoldRegistry(
            governance.records,
            clock=governance.clock,
            on_event=self._hold_event,
            sealing=governance.sealing,
        )

    @property
    def on_files(self) -> bool:
        """Whether the deployment keeps files (the workspace's layout) rather than a database."""
        return self.governance.storage.files is not None

    @property
    def purge_dir(self) -> Path:
        """The purge journal's folder, ``<governance>/purge`` (the file backend only).

        Raises:
            ConfigurationError: the deployment keeps no files (see :attr:`journal`).
        """
        journal = self.journal
        if not isinstance(journal, Path):
            storage = self.governance.storage
            raise ConfigurationError(
                f"the deployment stores in {storage.kind} ({storage.where}), which keeps its "
                "purge journal in the database, not in a folder; use Retention.journal"
            )
        return journal

    @property
    def journal(self) -> Path | PurgeJournal:
        """Where the purge journal is kept: the file backend's folder, or the storage's journal."""
        return self.governance.storage.purge_journal(PURGE_DIR)

    def _hold_event(self, event: str, attrs: Any) -> None:
        self.governance.audit.record(
            event,
            agent=attrs.get("agent"),
            subject_id=attrs.get("subject"),
            outcome="ok",
            hold_id=attrs.get("hold_id"),
            actor=attrs.get("actor"),
            policy_id=self.governance.policy.id,
            policy_version=self.governance.policy.version,
        )

    def scan(self, as_of: _dt.datetime | None = None) -> WorkspaceState:
        """The workspace as the planner sees it (lazy: read while iterated).

        ``as_of`` (default: now) matters on a database only, whose audit segments
        are listed when expired at that time (see ``_deployment``).
        """
        g = self.governance
        if not self.on_files:
            return scan_deployment(
                g.memory_backend,
                self._place(),
                audit=self._audit_storage(),
                retention=g.policy.retention,
                now=as_of if as_of is not None else g.clock.now(),
                holds=self.holds.active(),
                sealing=g.sealing,
            )
        return scan_workspace(
            g.file_workspace,
            governance_dir=g.governance_dir,
            audit_dir=audit_dir_of(g),
            holds=self.holds.active(),
            store_factory=g.store_factory,
            sealing=g.sealing,
        )

    def plan(self, as_of: _dt.datetime | None = None) -> Plan:
        """What the policy requires at ``as_of`` (default: now); nothing is changed.

        The floors (``audit_min_age``) are measured from the clock's now even
        when ``as_of`` is later: a preview never shows a floor cut short.
        """
        real_now = self.governance.clock.now()
        now = to_local(as_of) if as_of is not None else real_now
        return plan(self.scan(now), self.governance.policy, now, floor_now=real_now)

    def pending(self) -> Journal | StoredJournal | None:
        """The journal of an interrupted purge, if one waits to be resumed."""
        journal = self.journal
        if isinstance(journal, Path):
            return Journal.find(journal)
        return StoredJournal.find(journal)

    def reports(self, limit: int = 10) -> list[dict[str, Any]]:
        """The receipts of the last ``limit`` purges, newest first (counts, never paths).

        Each is a finished purge's :meth:`PurgeReport.to_dict` with ``finished``
        (when it ended); dry runs leave none.

        Raises:
            StorageError: a receipt is damaged.
        """
        journal = self.journal
        if isinstance(journal, Path):
            folder = journal / RECEIPTS_DIR
            names = sorted(p.name for p in folder.glob("*.json")) if folder.is_dir() else []
        else:
            names = sorted(self._place().names(f"{PURGE_DIR}/{RECEIPTS_DIR}", ".json"))
        found = []
        for name in reversed(names[-limit:] if limit > 0 else []):
            receipt = JsonDocument(
                journal / RECEIPTS_DIR / name
                if isinstance(journal, Path)
                else f"{PURGE_DIR}/{RECEIPTS_DIR}/{name}",
                place=None if isinstance(journal, Path) else self._place(),
                what="purge receipt",
                version=RECEIPT_FORMAT_VERSION,
            ).read()
            if receipt is not None:
                found.append(receipt)
        return found

    def _place(self) -> RecordPlace:
        place = self.governance.records
        assert not isinstance(place, Path)  # a deployment without files has a record place
        return place

    def _audit_storage(self) -> AuditStorage | None:
        """The deployment's audit storage (None when audit is off): what purges segments."""
        log = getattr(self.governance.audit, "log", None)
        return log if log is not None and hasattr(log, "expired_segments") else None

    def purge(
        self,
        *,
        as_of: _dt.datetime | None = None,
        dry_run: bool = False,
        on_progress: Any = None,
    ) -> PurgeReport:
        """Delete what the policy requires at ``as_of`` (default: now), skipping held data.

        ``as_of`` later than the clock's now is for dry runs only. An earlier
        ``as_of`` deletes only what was due at that moment; floors are always
        measured from the clock's now. An interrupted purge found on start is
        finished first. ``on_progress`` is called as ``(done, total)`` while a
        journal is applied.

        Raises:
            PurgeInFutureError: not a dry run and ``as_of`` is later than now
                (by more than a second); nothing was deleted.
            PurgeInProgressError: another purge holds the lock.
            StorageError: the journal could not be written (nothing deleted) or is damaged.
        """
        g = self.governance
        real_now = g.clock.now()
        now = to_local(as_of) if as_of is not None else real_now
        if dry_run:
            return self._dry_run(now)
        if now > real_now + FUTURE_SLACK:
            g.audit.record(
                "purge",
                agent=None,
                subject_id=None,
                outcome="refused",
                error=PurgeInFutureError.__name__,
                as_of=now.isoformat(),
                policy_id=g.policy.id,
                policy_version=g.policy.version,
            )
            raise PurgeInFutureError(now, real_now)
        try:
            report = self._purge(now, real_now, on_progress)
        except Exception as exc:
            g.audit.record(
                "purge",
                agent=None,
                subject_id=None,
                outcome="error",
                error=type(exc).__name__,
                as_of=now.isoformat(),
                policy_id=g.policy.id,
                policy_version=g.policy.version,
            )
            raise
        g.audit.record(
            "purge",
            agent=None,
            subject_id=None,
            outcome="ok" if not report.failed else "error",
            purge_id=report.purge_id,
            as_of=now.isoformat(),
            deleted=report.total_deleted,
            bytes_freed=report.bytes_freed,
            held=report.total_held,
            rules=sorted(report.deleted),
            policy_id=g.policy.id,
            policy_version=g.policy.version,
        )
        return report

    def _purge(self, now: _dt.datetime, real_now: _dt.datetime, on_progress: Any) -> PurgeReport:
        if not self.on_files:
            return self._purge_stored(now, real_now, on_progress)
        g = self.governance
        lock = _PurgeLock(self.purge_dir, g.file_workspace)
        tally = Tally()
        resumed: str | None = None
        discarded: str | None = None
        try:
            if g.governance_dir.is_dir():
                lock.acquire()
                journal = Journal.find(self.purge_dir)
                if journal is not None and _same_policy(journal, g.policy):
                    resumed = str(journal.header.get("id"))
                    self._executor().run(journal, tally, on_progress)
                    journal.remove()
                elif journal is not None:
                    # Planned under another policy (the admin changed it since the
                    # crash): its rest is not what the policy in force requires.
                    discarded = str(journal.header.get("id"))
                    journal.remove()
            purge_id = _new_id(g.clock.now())
            header = {
                "id": purge_id,
                "as_of": now.isoformat(),
                "policy_id": g.policy.id,
                "policy_version": g.policy.version,
            }
            items = _lock_before_deleting(
                iter_plan(self.scan(), g.policy.retention, now, floor_now=real_now), lock
            )
            footer = write_journal(self.purge_dir, header, items)
            tally.held.update(footer["held"])
            tally.held_bytes += footer["held_bytes"]
            current = Journal(self.purge_dir) if footer["end"] else None
            if current is not None:
                self._executor().run(current, tally, on_progress)
            report = self._report(purge_id, now, tally, resumed, discarded)
            if current is not None or resumed:
                self._receipt(report)
            if current is not None:
                current.remove()
        finally:
            lock.release()
        return report

    def _purge_stored(
        self, now: _dt.datetime, real_now: _dt.datetime, on_progress: Any
    ) -> PurgeReport:
        """:meth:`_purge` on a deployment without files: the storage's journal and lock."""
        g = self.governance
        storage = self.journal
        assert not isinstance(storage, Path)
        lock = g.storage.leadership(PURGE_DIR)
        if not lock.try_acquire():
            raise PurgeInProgressError(
                f"another purge is running on the deployment in {g.storage.where} (it holds the "
                f"lock {PURGE_DIR!r}); wait for it to finish and run again"
            )
        tally = Tally()
        resumed: str | None = None
        discarded: str | None = None
        try:
            executor = StoreExecutor(
                g.memory_backend, self._place(), self.holds, self._audit_storage(), g.sealing
            )
            journal = StoredJournal.find(storage)
            if journal is not None and _same_policy(journal, g.policy):
                resumed = str(journal.header.get("id"))
                executor.run(journal, tally, on_progress)
                journal.remove()
            elif journal is not None:
                discarded = str(journal.header.get("id"))  # planned under another policy
                journal.remove()
            purge_id = _new_id(g.clock.now())
            header = {
                "id": purge_id,
                "as_of": now.isoformat(),
                "policy_id": g.policy.id,
                "policy_version": g.policy.version,
            }
            items = iter_plan(self.scan(now), g.policy.retention, now, floor_now=real_now)
            footer = write_journal(storage, header, items)
            tally.held.update(footer["held"])
            tally.held_bytes += footer["held_bytes"]
            current = StoredJournal(storage) if footer["end"] else None
            if current is not None:
                executor.run(current, tally, on_progress)
            report = self._report(purge_id, now, tally, resumed, discarded)
            if current is not None or resumed:
                self._receipt(report)
            if current is not None:
                current.remove()
        finally:
            lock.release()
        return report

    def _executor(self) -> Executor:
        g = self.governance
        return Executor(
            g.file_workspace,
            g.governance_dir,
            audit_dir_of(g),
            self.holds,
            g.store_factory,
            getattr(g.audit, "purge_segments", None),
            sealing=g.sealing,
        )

    def _dry_run(self, now: _dt.datetime) -> PurgeReport:
        g = self.governance
        result = self.plan(now)
        pending = self.pending()
        held: Counter[str] = Counter(i.rule.value for i in result.held)
        return PurgeReport(
            purge_id=None,
            as_of=now,
            policy_id=g.policy.id,
            policy_version=g.policy.version,
            dry_run=True,
            deleted=result.counts(),
            bytes_freed=result.bytes_to_free,
            held=dict(held),
            held_bytes=sum(i.artefact.size for i in result.held),
            pending_journal=0 if pending is None else pending.total - len(pending.outcomes()),
            plan=result,
        )

    def _report(
        self,
        purge_id: str,
        now: _dt.datetime,
        tally: Tally,
        resumed: str | None,
        discarded: str | None,
    ) -> PurgeReport:
        g = self.governance
        return PurgeReport(
            purge_id=purge_id,
            as_of=now,
            policy_id=g.policy.id,
            policy_version=g.policy.version,
            dry_run=False,
            deleted={str(rule): n for rule, n in tally.deleted.items()},
            bytes_freed=tally.bytes_freed,
            held={str(rule): n for rule, n in tally.held.items()},
            held_bytes=tally.held_bytes,
            gone=tally.gone,
            changed=tally.changed,
            failed=tally.failed,
            errors=tuple(tally.errors),
            resumed=resumed,
            discarded=discarded,
        )

    def _receipt(self, report: PurgeReport) -> None:
        """Keep the counts (no paths, no content) as proof of the purge.

        A file in the purge folder; on a database, the record place's document
        ``purge/receipts/<id>.json`` (the same bytes).
        """
        name = f"{RECEIPTS_DIR}/{report.purge_id}.json"
        journal = self.journal
        receipt = JsonDocument(
            journal / name if isinstance(journal, Path) else f"{PURGE_DIR}/{name}",
            place=None if isinstance(journal, Path) else self._place(),
            what="purge receipt",
            version=RECEIPT_FORMAT_VERSION,
            encode=_indented,
        )
        receipt.write({**report.to_dict(), "finished": self.governance.clock.now().isoformat()})


def _indented(document: dict[str, Any]) -> str:
    return json.dumps(document, indent=1)  # a receipt is for people to read


def _same_policy(journal: Journal | StoredJournal, policy: Policy) -> bool:
    header = journal.header
    return (header.get("policy_id"), header.get("policy_version")) == (policy.id, policy.version)


def _lock_before_deleting(items: Iterable[PlanItem], lock: _PurgeLock) -> Iterator[PlanItem]:
    for item in items:
        if not item.held:
            lock.acquire()
        yield item


def _new_id(now: _dt.datetime) -> str:
    """Sortable by time: ``<UTC yyyymmddThhmmss>Z-<8 hex>``."""
    utc = (now if now.tzinfo else now.astimezone()).astimezone(_dt.UTC)
    return f"{utc:%Y%m%dT%H%M%S}Z-{secrets.token_hex(4)}"


if TYPE_CHECKING:
    _conforms: type[Leadership] = _PurgeLock  # the purge's lock, on the leadership seam
