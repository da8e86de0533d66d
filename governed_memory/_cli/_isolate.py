"""``isolate-subjects``: move each agent's shared memory to one memory per data subject.

A thin loop over ``governed_memory._stores.isolate_subjects`` for every agent
(or one) of the workspace, through the governance's memory backend and store
factory, so it works on encrypted workspaces as on plaintext ones. Each agent
done is audited (``memory.isolate``). See docs/cli.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from .._audit import AuditEvent
from .._errors import GovernedMemoryError, NotFoundError
from .._format import parse_memory
from .._stores import AgentStore, isolate_subjects
from ._context import CliContext
from ._render import emit_json, emit_table, json_option

if TYPE_CHECKING:
    from .._wiring import Governance

__all__ = ["commands"]


def _movable(store: AgentStore) -> int:
    """How many records of the agent's own memory name a subject (what would move)."""
    text = store.read_memory()
    if text is None:
        return 0
    return sum(1 for record in parse_memory(text).records if record.subject_id)


def _header(store: AgentStore) -> str:
    """What a new subject memory starts with: the agent memory's own header (its preamble)."""
    text = store.read_memory()
    return parse_memory(text).preamble if text else ""


def _isolate(governance: Governance, agent: str, dry_run: bool) -> int:
    backend = governance.memory_backend
    header: list[str] = []
    store = backend.open(agent, lambda: header[0])
    try:
        if dry_run:
            return _movable(store)
        header.append(_header(store))
        try:
            moved = isolate_subjects(store)
        except GovernedMemoryError as exc:
            governance.audit.record(
                AuditEvent.ISOLATE,
                agent=agent,
                subject_id=None,
                outcome="error",
                error=type(exc).__name__,
                policy_id=governance.policy.id,
                policy_version=governance.policy.version,
            )
            raise
        governance.audit.record(
            AuditEvent.ISOLATE,
            agent=agent,
            subject_id=None,
            outcome="ok",
            moved=moved,
            policy_id=governance.policy.id,
            policy_version=governance.policy.version,
        )
        return moved
    finally:
        store.close()


@click.command("isolate-subjects")
@click.option("--agent", default=None, help="Only this agent (default: every agent).")
@click.option("--dry-run", is_flag=True, help="Count the records that would move; change nothing.")
@json_option
@click.pass_obj
def isolate_subjects_command(
    cli: CliContext, agent: str | None, dry_run: bool, as_json: bool
) -> None:
    """Move each agent's records that name a data subject into that subject's own memory.

    What a Conversation under `[memory] isolation = "subject"` does on its
    first open, for the whole workspace at once: records without a subject
    stay in the agent's MEMORY.md, archives stay where they are. Crash-safe
    and idempotent (run it again after an interruption). Stop the agents first.
    """
    governance = cli.governance()
    backend = governance.memory_backend
    if agent is not None and not backend.has_agent(agent):
        raise NotFoundError(
            f"agent {agent!r} has no memory in workspace {cli.workspace}; list the agents "
            "with `governed-memory agents`"
        )
    names = [agent] if agent is not None else backend.agents()
    moved = {name: _isolate(governance, name, dry_run) for name in names}
    isolation = str(governance.policy.memory.isolation)
    if as_json:
        emit_json(
            {
                "dry_run": dry_run,
                "isolation": isolation,
                "agents": moved,
                "records": sum(moved.values()),
            }
        )
        return
    verb = "would move" if dry_run else "moved"
    if names:
        emit_table(None, ["agent", f"records {verb}"], sorted(moved.items()))
    click.echo(
        f"{sum(moved.values())} record(s) {verb} to subject memories in {len(names)} agent(s)"
        + (" (dry run: nothing was changed)" if dry_run else "")
    )
    if isolation != "subject":
        click.echo(
            f"note: the policy {governance.policy.id!r} has memory.isolation = "
            f"{isolation!r}: its conversations preload only the agent's own memory, so "
            "moved records are no longer preloaded there; they are preloaded per subject "
            'under isolation = "subject"'
        )


commands: list[click.Command] = [isolate_subjects_command]
