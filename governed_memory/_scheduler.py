"""Scheduled purges: APScheduler 3.x driven by the policy's ``[schedule]``.

:func:`start_scheduler` starts a :class:`PurgeScheduler` inside an
application (a ``BackgroundScheduler``: its own threads); ``governed-memory
scheduler run`` runs the same object in the foreground until SIGTERM/SIGINT.

Guarantees:

* At most one scheduler acts per workspace. Each scheduler tries, every
  ``leader_retry`` seconds, to take the deployment's leadership
  ``"scheduler"`` and keeps it for its lifetime: an exclusive ``flock`` on
  ``<governance>/scheduler/leader.lock``, or on a database a session-level
  advisory lock (``PgLeadership``), across every host. The kernel (or the
  server, when the session's socket closes) drops it when the leader's
  process dies, even by kill -9, so a waiting scheduler takes over within
  ``leader_retry``. Two schedulers in one process also exclude each other.
* Runs never overlap (``max_instances=1``) and a backlog of missed fire times
  runs once (``coalesce=True``). A CLI purge at the same time is refused by
  the purge lock, and that run is retried at the next fire time.
* Catch-up: the time of the last successful run is kept in
  ``<governance>/scheduler/state.json`` (on a database: the record place's
  document ``scheduler/state.json``, shared by every host). When a scheduler becomes leader and
  the trigger's first fire time after that run is already past (the machine
  was off, no scheduler was running), it purges at once instead of waiting
  for the next fire time. A workspace never purged by a scheduler is purged
  when the first scheduler becomes leader.
* A failed run is logged with its error and does not count as a success, so
  the next start catches it up.
* With each run the leader also does the other due work (by default:
  erasures whose grace period is over, and interrupted erasures), then
  reports the data-subject requests coming due within ``[requests]
  warn_within`` or past their deadline (:func:`report_due_requests`): one
  audit entry (and span) ``request.due`` per request, and one log line on
  ``governed_memory.scheduler`` an admin's monitoring can alert on (ERROR
  when past the deadline, WARNING when due soon), naming the request id,
  never the subject.
* Audit checkpoints: with ``evidence.checkpoint_every`` the leader signs the
  audit chain head at that interval (an ``audit.checkpoint`` entry, see
  docs/evidence.md), the first one when it becomes leader.

Time: fire times follow the real clock in ``schedule.timezone``; the purge's
``as_of`` and the catch-up decision read ``governance.clock`` (a FixedClock
in tests).

For the CLI (a documented internal name): ``schedule_status``, the
read-only status ``schedule status`` prints (schedule, last and next run, leader).
"""

from __future__ import annotations

import datetime as _dt
import logging
import threading
import zoneinfo
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from apscheduler.schedulers.background import (  # type: ignore[import-untyped,unused-ignore]
    BackgroundScheduler,
)
from apscheduler.triggers.cron import CronTrigger  # type: ignore[import-untyped,unused-ignore]
from apscheduler.triggers.interval import (  # type: ignore[import-untyped,unused-ignore]
    IntervalTrigger,
)

from ._base import FileLock, LeaderLock, format_duration
from ._errors import ConfigurationError
from ._policy import SchedulePolicy
from ._protocols import RecordPlace
from ._records import JsonDocument
from ._retention import PurgeReport, Retention

if TYPE_CHECKING:
    from ._audit import Checkpoint
    from ._governance import Governance
    from ._protocols import Leadership
    from ._subjects import Standing

__all__ = [
    "LeaderLock",
    "PurgeScheduler",
    "build_trigger",
    "default_tasks",
    "report_due_requests",
    "schedule_status",
    "start_scheduler",
]

logger = logging.getLogger("governed_memory.scheduler")

SCHEDULER_DIR = "scheduler"
STATE_FILE = "state.json"
LEADER_LOCK = "leader.lock"
STATE_FORMAT_VERSION = 1
PURGE_JOB = "governed-memory-purge"
CHECKPOINT_JOB = "governed-memory-checkpoint"
LEADER_JOB = "governed-memory-leader"

Task = Callable[["Governance"], object]


def build_trigger(schedule: SchedulePolicy, *, start: _dt.datetime | None = None) -> Any:
    """The APScheduler trigger of ``schedule`` (cron, else interval).

    Args:
        start: anchors an interval (its fire times are ``start + k * interval``);
            pass the last successful run so restarts keep the rhythm.

    Raises:
        ConfigurationError: the policy schedules no purge.
    """
    zone = zoneinfo.ZoneInfo(schedule.timezone)
    if schedule.purge_cron:
        return CronTrigger.from_crontab(schedule.purge_cron, timezone=zone)
    if schedule.purge_interval is not None:
        return IntervalTrigger(
            seconds=int(schedule.purge_interval.total_seconds()),
            start_date=start.astimezone(zone) if start is not None else None,
            timezone=zone,
        )
    raise ConfigurationError(
        "the policy schedules no purge; set schedule.purge_cron (e.g. '0 3 * * *') or "
        "schedule.purge_interval (e.g. '1d') in the policy file"
    )


def _aware(when: _dt.datetime) -> _dt.datetime:
    return when if when.tzinfo is not None else when.astimezone()


class _State:
    """``scheduler/state.json``: when the last successful scheduled purge started.

    ``records`` is the deployment's record folder (the governance folder) or
    record place (a database's, where every host's scheduler reads it).
    """

    def __init__(self, records: Path | RecordPlace) -> None:
        name = f"{SCHEDULER_DIR}/{STATE_FILE}"
        self._document = JsonDocument(
            records / name if isinstance(records, Path) else name,
            place=None if isinstance(records, Path) else records,
            what="scheduler state",
            version=STATE_FORMAT_VERSION,
            fix=f"upgrade, or remove the {'file' if isinstance(records, Path) else 'document'} "
            "(the next start then purges at once)",
        )

    @property
    def where(self) -> str:
        return self._document.where

    def last_success(self) -> _dt.datetime | None:
        """The start of the last successful scheduled purge; None before the first.

        Raises:
            StorageError: the file cannot be read, or is damaged.
            FormatVersionError: written by another format version.
        """
        data = self._document.read()
        value = data.get("last_success") if data is not None else None
        return _dt.datetime.fromisoformat(value) if isinstance(value, str) else None

    def record_success(self, started: _dt.datetime, report: PurgeReport) -> None:
        # One process writes it (the leader): no lock needed beyond leadership.
        self._document.write(
            {
                "last_success": _aware(started).isoformat(),
                "purge_id": report.purge_id,
                "deleted": report.total_deleted,
            }
        )


class PurgeScheduler:
    """Runs the policy's purges on schedule for one workspace (see the module docs).

    Args:
        governance: the workspace, policy, clock and audit sink.
        retention: the retention service (default: ``Retention(governance)``).
        tasks: more due work run after each purge, in order, each given the
            governance; an error in one is logged. Default: scheduled
            erasures whose grace period is over (:func:`default_tasks`).
        leader_retry: seconds between attempts to become the leader.
    """

    def __init__(
        self,
        governance: Governance,
        *,
        retention: Retention | None = None,
        tasks: Sequence[Task] | None = None,
        leader_retry: float = 5.0,
    ) -> None:
        build_trigger(governance.policy.schedule)  # refuse a policy without a schedule early
        self.governance = governance
        self.retention = retention or Retention(governance)
        self.tasks = tuple(tasks) if tasks is not None else default_tasks()
        self.leader_retry = leader_retry
        self._state = _State(governance.records)
        self._zone = zoneinfo.ZoneInfo(governance.policy.schedule.timezone)
        self._scheduler = BackgroundScheduler(timezone=self._zone)
        # The deployment's leadership: every host's scheduler competes for the same one.
        self._leader: Leadership = governance.storage.leadership(SCHEDULER_DIR)
        self._mutex = threading.Lock()
        self.runs = 0
        self.last_report: PurgeReport | None = None
        self.last_error: BaseException | None = None
        self.leading = threading.Event()

    # -- leadership --------------------------------------------------------

    def _try_lock(self) -> bool:
        return self._leader.try_acquire()

    def _try_lead(self) -> None:
        with self._mutex:
            if self._leader.held:
                return
            try:
                if not self._try_lock():
                    logger.debug("another scheduler leads %s; retrying", self.governance.workspace)
                    return
            except OSError as exc:
                logger.error("cannot take the scheduler lock of %s: %s", self._state.where, exc)
                return
        try:
            last = self._state.last_success()
            trigger = build_trigger(self.governance.policy.schedule, start=last)
            catch_up = self.catch_up_due(last, trigger)
        except Exception as exc:
            # Leading without a schedule would block every other scheduler: step down.
            logger.error("scheduler cannot start purging %s: %s", self.governance.workspace, exc)
            self._release_lock()
            return
        self._scheduler.remove_job(LEADER_JOB)
        job = self._scheduler.add_job(
            self.run_once,
            trigger,
            id=PURGE_JOB,
            name="retention purge",
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
        )
        if catch_up:
            job.modify(next_run_time=_dt.datetime.now(self._zone))
        self._schedule_checkpoints()
        logger.info(
            "scheduler leads workspace %s (policy %s v%s); %s",
            self.governance.workspace,
            self.governance.policy.id,
            self.governance.policy.version,
            "a missed purge runs now" if catch_up else f"next purge at {job.next_run_time}",
        )
        self.leading.set()

    def catch_up_due(self, last: _dt.datetime | None, trigger: Any) -> bool:
        """Whether a fire time after ``last`` (the last success) is already past."""
        if last is None:
            return True
        now = _aware(self.governance.clock.now())
        missed = trigger.get_next_fire_time(None, last + _dt.timedelta(microseconds=1))
        return missed is not None and missed <= now

    def _schedule_checkpoints(self) -> None:
        every = self.governance.policy.evidence.checkpoint_every
        if every is None:
            return
        self._scheduler.add_job(
            self.checkpoint_once,
            IntervalTrigger(seconds=int(every.total_seconds()), timezone=self._zone),
            id=CHECKPOINT_JOB,
            name="signed audit checkpoint",
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
            next_run_time=_dt.datetime.now(self._zone),
            replace_existing=True,
        )

    # -- runs --------------------------------------------------------------

    def checkpoint_once(self) -> Checkpoint | None:
        """Sign the audit chain head now (``evidence.checkpoint_every``); errors are logged."""
        try:
            signer = self.governance.signer
            if signer is None:
                raise ConfigurationError(
                    f"policy {self.governance.policy.id} sets evidence.checkpoint_every but no "
                    "signing key is configured; create one with `governed-memory keys "
                    "signing-keygen --out FILE` and set GOVERNED_MEMORY_SIGNING_KEY_FILE"
                )
            made: Checkpoint = self.governance.audit.checkpoint(signer)  # type: ignore[attr-defined]
        except Exception as exc:
            logger.error("audit checkpoint of %s failed: %s", self.governance.workspace, exc)
            return None
        logger.info(
            "audit checkpoint of %s: seq %d signed by key %s",
            self.governance.workspace,
            made.seq,
            made.key_id,
        )
        return made

    def run_once(self) -> PurgeReport | None:
        """One scheduled run: purge, then the extra tasks; errors are logged, not raised.

        The tasks run even when the purge failed: a due erasure must not wait
        for a purge problem to be fixed.
        """
        started = self.governance.clock.now()
        try:
            report = self.retention.purge(as_of=started)
            self._state.record_success(started, report)
        except Exception as exc:
            self.last_error = exc
            logger.error("scheduled purge of %s failed: %s", self.governance.workspace, exc)
            self._run_tasks()
            return None
        finally:
            self.runs += 1
        self.last_report, self.last_error = report, None
        logger.info(
            "purge %s of %s: deleted %d (%d bytes), held %d, as of %s",
            report.purge_id,
            self.governance.workspace,
            report.total_deleted,
            report.bytes_freed,
            report.total_held,
            report.as_of.isoformat(timespec="seconds"),
        )
        for note in report.notes:  # what no purge deletes: for the operator, by hand
            logger.warning("purge %s did not delete: %s", report.purge_id, note)
        self._run_tasks()
        return report

    def _run_tasks(self) -> None:
        for task in self.tasks:
            try:
                task(self.governance)
            except Exception as exc:
                logger.error("scheduled task %r failed: %s", task, exc)

    # -- lifetime ----------------------------------------------------------

    def start(self) -> PurgeScheduler:
        """Start the threads; leadership and catch-up follow within ``leader_retry``."""
        self._scheduler.add_job(
            self._try_lead,
            IntervalTrigger(seconds=self.leader_retry, timezone=self._zone),
            id=LEADER_JOB,
            name="take the scheduler lock",
            max_instances=1,
            coalesce=True,
            next_run_time=_dt.datetime.now(self._zone),
        )
        self._scheduler.start()
        return self

    @property
    def running(self) -> bool:
        return bool(self._scheduler.running)

    @property
    def next_run_time(self) -> _dt.datetime | None:
        job = self._scheduler.get_job(PURGE_JOB)
        return None if job is None else job.next_run_time

    def trigger_now(self) -> None:
        """Ask for a purge as soon as possible (no-op unless leading)."""
        job = self._scheduler.get_job(PURGE_JOB)
        if job is not None:
            job.modify(next_run_time=_dt.datetime.now(self._zone))

    def stop(self, wait: bool = True) -> None:
        """Stop firing, let a running purge finish (``wait``), release leadership."""
        if self._scheduler.running:
            self._scheduler.shutdown(wait=wait)
        self._release_lock()

    def _release_lock(self) -> None:
        with self._mutex:
            self._leader.release()
        self.leading.clear()

    def __enter__(self) -> PurgeScheduler:
        return self if self.running else self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def default_tasks() -> tuple[Task, ...]:
    """What every scheduler runs after its purge unless told otherwise.

    Due erasures, then the report of requests coming due or overdue (after
    the erasures, which may have closed some).
    """
    from ._subjects import scheduled_erasure_task

    return (scheduled_erasure_task, report_due_requests)


def report_due_requests(governance: Governance) -> list[Standing]:
    """Report every open request due within ``[requests] warn_within`` or past its deadline.

    Per request: an audit entry and span ``request.due`` (outcome
    ``due_soon``, ``late`` (past the internal deadline) or ``overdue`` (past
    the legal one), the subject as its keyed hash) and a log line naming the
    request id, its dates and ``requests show``. Returns what it reported.
    """
    from ._subjects import standings

    found = [s for s in standings(governance) if s.state in ("due_soon", "late", "overdue")]
    for item in found:
        request = item.request
        governance.audit.record(
            "request.due",
            agent=None,
            subject_id=request.subject,
            outcome=item.state,
            request_id=request.id,
            kind=request.kind,
            due=request.due.isoformat(),
            deadline=item.deadline.isoformat(),
            days_left=item.days_left,
            policy_id=governance.policy.id,
            policy_version=governance.policy.version,
        )
        days = item.days_left
        when = f"{days} days left" if days >= 0 else f"{-days} days past it"
        (logger.error if item.past_deadline else logger.warning)(
            "data-subject request %s (%s) is %s: deadline %s (legal due date %s), %s; "
            "`governed-memory requests show %s`",
            request.id,
            request.kind,
            item.state.replace("_", " "),
            item.deadline,
            request.due,
            when,
            request.id,
        )
    return found


def start_scheduler(governance: Governance, **options: Any) -> PurgeScheduler:
    """Start scheduled purges inside an application; call ``.stop()`` on shutdown.

    ``options`` go to :class:`PurgeScheduler`.

    Raises:
        ConfigurationError: the policy schedules no purge.
    """
    return PurgeScheduler(governance, **options).start()


def schedule_status(governance: Governance) -> dict[str, Any]:
    """The schedule, the last successful run, the next due run and the leader (read-only).

    ``overdue``: a run was due after the last successful one and has not happened.
    ``never_run``: a purge is scheduled but none has succeeded yet (a new
    deployment, or a scheduler that was never started); not called overdue,
    since nothing says since when the schedule has been in force.
    """
    schedule = governance.policy.schedule
    last = _State(governance.records).last_success()
    status: dict[str, Any] = {
        "schedule": schedule.purge_cron
        or (
            f"every {format_duration(schedule.purge_interval)}"
            if schedule.purge_interval
            else "none"
        ),
        "timezone": schedule.timezone,
        "last_success": last.isoformat() if last else None,
        "next_due": None,
        "overdue": False,
        "never_run": False,
        "leader_pid": _leader_of(governance),
    }
    if schedule.purge_cron or schedule.purge_interval:
        trigger = build_trigger(schedule, start=last)
        now = _aware(governance.clock.now())
        after = last + _dt.timedelta(microseconds=1) if last else now
        due = trigger.get_next_fire_time(None, after)
        status["next_due"] = due.isoformat() if due else None
        status["overdue"] = last is not None and due is not None and due <= now
        status["never_run"] = last is None
    return status


def _leader_of(governance: Governance) -> int | None:
    """The leading scheduler's pid; None when none leads.

    The file backend: the pid the leader wrote into its lock file. A database:
    the server process of the session holding the advisory lock (``pg_locks``),
    which ``pg_terminate_backend(pid)`` ends, and the lease with it.
    """
    records = governance.records
    if isinstance(records, Path):
        return _leader_pid(records / SCHEDULER_DIR / LEADER_LOCK)
    return _advisory_holder(governance.storage.leadership(SCHEDULER_DIR))


_HOLDER = """SELECT pid FROM pg_locks
    WHERE locktype = 'advisory' AND granted AND objsubid = 1
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND classid::bigint = %s AND objid::bigint = %s"""


def _advisory_holder(leadership: Leadership) -> int | None:
    """The server pid of the session holding ``leadership``'s advisory lock (a ``PgLeadership``).

    A bigint advisory key shows in ``pg_locks`` as its high half (``classid``)
    and low half (``objid``), ``objsubid`` 1. None for a leadership of
    another kind, or when no session holds it.
    """
    key, db = getattr(leadership, "key", None), getattr(leadership, "db", None)
    if not isinstance(key, int) or db is None:
        return None
    unsigned = key & 0xFFFF_FFFF_FFFF_FFFF
    with db.transaction("finding the scheduler's leader") as conn:
        row = conn.execute(_HOLDER, (unsigned >> 32, unsigned & 0xFFFF_FFFF)).fetchone()
    return None if row is None else int(row[0])


def _leader_pid(path: Path) -> int | None:
    """The pid written by the scheduler holding ``path``, or None when none holds it."""
    lock = FileLock(path)
    try:
        fd = lock.acquire(shared=True, blocking=False, create=False)  # a probe creates nothing
    except FileNotFoundError:
        return None
    if fd is not None:
        lock.release(fd)
        return None
    try:
        with open(path, "rb") as handle:
            text = handle.read(32).decode("ascii", "replace").strip()
    except FileNotFoundError:
        return None  # the leader stopped meanwhile
    return int(text) if text.isdigit() else -1


if TYPE_CHECKING:
    _conforms: type[Leadership] = LeaderLock  # the file backend of the leadership seam
