"""The command table: each command's module is imported only when that command runs.

``governed-memory --help`` lists every command with its one-line summary, and
``--version`` prints the version; neither needs a command's code, pydantic,
cryptography or rich. So the top-level group holds :data:`COMMANDS` (name,
module, attribute and summary, as text) instead of the command objects, and
:class:`LazyCommands` imports a command's module on first access and applies
the CLI's guards to it (:func:`._boundary.harden`). A test checks the table
against the real commands (every command listed, every summary the one its
help text gives), so the two cannot drift apart.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, MutableMapping
from dataclasses import dataclass

import click

from ._boundary import harden

__all__ = ["COMMANDS", "CommandEntry", "LazyCommands", "LazyGroup"]


@dataclass(frozen=True)
class CommandEntry:
    """Where a top-level command lives, and the summary ``--help`` shows for it."""

    module: str
    attribute: str
    summary: str


COMMANDS: dict[str, CommandEntry] = {
    "agents": CommandEntry(
        "_memory",
        "agents",
        "List the agents in the workspace with message and archive counts, size and last activity.",
    ),
    "audit": CommandEntry(
        "_audit",
        "audit_group",
        "Inspect and verify the tamper-evident audit log (see docs/audit.md).",
    ),
    "chat": CommandEntry(
        "_chat", "chat", "Chat with AGENT at the terminal; its memory is kept between runs."
    ),
    "consent": CommandEntry(
        "_consent",
        "consent_group",
        "Record and inspect consent per data subject and purpose (see docs/consent.md).",
    ),
    "console": CommandEntry(
        "_console",
        "console_group",
        "Serve the privacy office's console in the browser (see docs/console.md).",
    ),
    "db": CommandEntry(
        "_db",
        "db_group",
        "Create and inspect the PostgreSQL schema of a database deployment (see docs/postgres.md).",
    ),
    "decrypt-workspace": CommandEntry(
        "_keys",
        "decrypt_workspace",
        "Turn every encrypted memory and archive (and sealed record) back into plaintext "
        "(idempotent).",
    ),
    "demo": CommandEntry(
        "_memory",
        "demo",
        "Run the memory cycle offline: write-through, compaction, preload, files on disk.",
    ),
    "encrypt-workspace": CommandEntry(
        "_keys",
        "encrypt_workspace",
        "Encrypt every plaintext MEMORY.md and archive of the workspace (idempotent, crash-safe).",
    ),
    "erase": CommandEntry(
        "_subjects",
        "erase_command",
        "Erase a data subject's records and derived summaries (or a whole agent).",
    ),
    "erasures": CommandEntry(
        "_subjects", "erasures_group", "List, inspect, resume and run scheduled erasures."
    ),
    "export": CommandEntry(
        "_subjects",
        "export_command",
        "Export everything held about a data subject (or an agent) into a new folder.",
    ),
    "hold": CommandEntry(
        "_retention",
        "hold_group",
        "Legal holds: keep an agent's or a subject's data from purges and erasure.",
    ),
    "isolate-subjects": CommandEntry(
        "_isolate",
        "isolate_subjects_command",
        "Move each agent's records that name a data subject into that subject's own memory.",
    ),
    "keys": CommandEntry(
        "_keys",
        "keys_group",
        "Manage encryption keys: generate a master key, show which key wraps what, rotate "
        "(docs/encryption.md).",
    ),
    "migrate-storage": CommandEntry(
        "_migrate",
        "migrate_storage_command",
        "Copy the workspace into PostgreSQL (--to postgres) or back into a folder (--to files).",
    ),
    "policy": CommandEntry(
        "_policy", "policy_group", "Validate and inspect policies (see docs/policies.md)."
    ),
    "purge": CommandEntry(
        "_retention", "purge", "Delete what the retention policy requires (see docs/retention.md)."
    ),
    "rectify": CommandEntry(
        "_rectify",
        "rectify_command",
        "Correct a data subject's record everywhere it is stored (GDPR Art. 16).",
    ),
    "requests": CommandEntry(
        "_requests",
        "requests_group",
        "The register of data-subject requests: arrival, identity, deadline, closing.",
    ),
    "scheduler": CommandEntry(
        "_retention",
        "scheduler_group",
        "Scheduled purges from the policy's [schedule] (see docs/retention.md).",
    ),
    "show": CommandEntry(
        "_memory", "show", "Print AGENT's memory as records (role, timestamp, content)."
    ),
    "verify": CommandEntry(
        "_evidence",
        "verify_group",
        "Verify signed evidence with the deployment's public key alone (docs/evidence.md).",
    ),
}
"""Every top-level command, by name, sorted as ``--help`` lists them."""


class LazyCommands(MutableMapping[str, click.Command]):
    """A group's commands by name: the names from :data:`COMMANDS`, the objects imported on access.

    Iteration, ``len`` and ``in`` read the table only; getting a command
    imports its module (once) and guards it. ``add_command`` still works
    (a command added this way is used as given).
    """

    def __init__(self, table: dict[str, CommandEntry]) -> None:
        self._table = table
        self._loaded: dict[str, click.Command] = {}

    def __getitem__(self, name: str) -> click.Command:
        loaded = self._loaded.get(name)
        if loaded is not None:
            return loaded
        entry = self._table[name]  # KeyError for an unknown name, as a dict
        module = importlib.import_module(f"{__package__}.{entry.module}")
        command: click.Command = getattr(module, entry.attribute)
        harden(command, name)
        self._loaded[name] = command
        return command

    def __setitem__(self, name: str, command: click.Command) -> None:
        self._loaded[name] = command

    def __delitem__(self, name: str) -> None:
        self._loaded.pop(name, None)
        self._table = {key: entry for key, entry in self._table.items() if key != name}

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(set(self._table) | set(self._loaded)))

    def __len__(self) -> int:
        return len(set(self._table) | set(self._loaded))

    def __contains__(self, name: object) -> bool:
        return name in self._table or name in self._loaded

    def summary(self, name: str, limit: int) -> str:
        """The one-line summary ``--help`` shows for ``name``, without importing it when possible."""
        entry = self._table.get(name)
        if entry is None or name in self._loaded:
            return self[name].get_short_help_str(limit)
        # a stand-in with the same help text shortens it exactly as the command would
        return click.Command(name, help=entry.summary).get_short_help_str(limit)


class LazyGroup(click.Group):
    """A group whose ``--help`` lists its commands from the table, importing none of them."""

    commands: LazyCommands

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        names = self.list_commands(ctx)
        if not names:
            return
        limit = formatter.width - 6 - max(len(name) for name in names)
        rows = [(name, self.commands.summary(name, limit)) for name in names]
        with formatter.section("Commands"):
            formatter.write_dl(rows)
