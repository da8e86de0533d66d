"""Retention: scanning a workspace, the pure planner, the journaled executor.

``_state`` (plain values) -> ``_plan`` (pure rules) -> ``_journal`` (the plan
on disk) -> ``_execute`` (deletions under locks); ``_scan`` reads the disk
into state and ``_purge`` is the shell that wires them for one workspace.
``_deployment`` scans and executes through the storage seam instead, for a
deployment that keeps no files (a database).
"""

from __future__ import annotations

from ._deployment import StoredJournal, StoreExecutor, scan_deployment
from ._execute import Executor, Tally
from ._journal import Journal, JournalError, JournalFolder
from ._plan import Plan, PlanItem, Rule, iter_plan, plan
from ._purge import PurgeInFutureError, PurgeInProgressError, PurgeReport, Retention, to_local
from ._scan import scan_workspace
from ._state import AgentState, Artefact, WorkspaceState

__all__ = [
    "AgentState",
    "Artefact",
    "Executor",
    "Journal",
    "JournalError",
    "JournalFolder",
    "Plan",
    "PlanItem",
    "PurgeInFutureError",
    "PurgeInProgressError",
    "PurgeReport",
    "Retention",
    "Rule",
    "StoreExecutor",
    "StoredJournal",
    "Tally",
    "WorkspaceState",
    "iter_plan",
    "plan",
    "scan_deployment",
    "scan_workspace",
    "to_local",
]
