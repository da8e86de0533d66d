"""Memory commands: ``demo``, ``agents`` and ``show``.

``agents`` and ``show`` read through :mod:`governed_memory._memory._inspect` with the
store the policy selects (``Governance.store_factory``), so they read
encrypted memory as well as plaintext; on a database deployment they list and
read through ``Governance.memory_backend`` (no folder is involved). ``demo``
runs the whole memory cycle on a temporary workspace, or on the database when
one is configured. See docs/cli.md.
"""

from __future__ import annotations

import datetime as _dt
import shutil
import stat
import tempfile
import textwrap
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text
from rich.tree import Tree

from .._base import memory_md_path
from .._memory import AgentInfo, Conversation, agent_info, agent_records, list_agents
from .._stores import AgentStore, StoreFactory
from ._context import CliContext, actor_option

if TYPE_CHECKING:
    from .._wiring import Governance
from ._render import emit_json, emit_table, json_option

__all__ = ["commands"]


def _console() -> Console:
    # Resolved at call time, so output goes to whatever sys.stdout is then
    # (click's test runner swaps it). rich drops colours when it is not a
    # terminal; highlight=False keeps rich from colouring numbers in content.
    return Console(highlight=False)


def human_size(size: int) -> str:
    """``412 B``, ``2.1 KiB``, ``3.0 MiB``."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def _lazy_store_factory(cli: CliContext) -> StoreFactory:
    """The policy's store factory, building the Governance only when a store is needed.

    Listing an empty or missing workspace then touches nothing at all.
    """
    governance = None

    def factory(path: Path, header: Callable[[], str]) -> AgentStore:
        nonlocal governance
        if governance is None:
            governance = cli.governance()
        return governance.store_factory(path, header)

    return factory


def _on_database(cli: CliContext) -> Governance | None:
    """The command's Governance when the deployment keeps its memory in a database, else None.

    A file deployment's commands keep reading the workspace's folders (and
    build no Governance for an empty one); naming the storage connects nothing.
    """
    storage = cli.storage()
    try:
        if storage.files is not None:
            return None
    finally:
        storage.close()
    return cli.governance()


def _demo_database(cli: CliContext) -> Governance | None:
    """The demo's Governance on the deployment's database; None on files.

    The built-in default policy, encrypted when the deployment's policy
    encrypts: the database is shared with the deployment, whose rows must stay
    ciphertext (its master key comes from the settings, as every host's does).
    """
    from .._policy import Policy, resolve_policy

    settings = cli.settings()
    storage = cli.storage(settings)
    try:
        if storage.files is not None:
            return None
    finally:
        storage.close()
    policy = Policy()
    if resolve_policy(settings).policy.encryption.enabled:
        data = policy.model_dump(exclude={"source"}, mode="json")
        data["encryption"] = {"enabled": True}
        policy = Policy.model_validate(data)
    return cli.governance(settings, policy=policy)  # its pool closed when the command ends


# -- agents ---------------------------------------------------------------------


def _when(value: _dt.datetime | None) -> str:
    return value.isoformat(sep=" ", timespec="seconds") if value else "-"


@click.command("agents")
@json_option
@click.pass_obj
def agents(cli: CliContext, as_json: bool) -> None:
    """List the agents in the workspace with message and archive counts, size and last activity.

    On a database deployment: the agents the database keeps, read through its stores.

    Subject memories (isolation = "subject") count with their agent: the
    last column says how many it has, and their messages, archives and
    bytes are in the agent's totals.
    """
    database = _on_database(cli)
    if database is not None:  # the agents its memory backend keeps
        found = list_agents(memory=database.memory_backend)
        if as_json:
            emit_json([info.to_dict() for info in found])
            return
        where = database.storage.where
        if not found:
            click.echo(
                f"No agents in {where} yet. An agent appears here once a "
                "Conversation has stored a message; `governed-memory demo` shows one."
            )
            return
        _agents_table(f"Agents in {where}", found)
        return
    workspace = cli.file_workspace().absolute()
    found = list_agents(workspace, store_factory=_lazy_store_factory(cli))
    if as_json:
        emit_json([info.to_dict() for info in found])
        return
    if not found:
        click.echo(
            f"No agents in workspace {workspace} yet. An agent appears here once a "
            "Conversation with its memory_md_path has been created; "
            "`governed-memory demo` shows one."
        )
        if not workspace.is_dir():
            click.echo(
                f"Note: the folder {workspace} does not exist; check --workspace (or "
                "$WORKSPACE_DIR) for a typo."
            )
        return
    _agents_table(f"Agents in {workspace}", found)


def _agents_table(title: str, found: list[AgentInfo]) -> None:
    emit_table(
        title,
        ["agent", "messages", "archives", "size", "last activity", "subject memories"],
        [
            [
                i.name,
                i.messages,
                i.archives,
                human_size(i.size_bytes),
                _when(i.last_activity),
                i.subject_memories,
            ]
            for i in found
        ],
    )


# -- show -----------------------------------------------------------------------


@click.command("show")
@click.argument("agent")
@click.option(
    "--archives", is_flag=True, help="Also list the records of every archive, oldest first."
)
@click.option(
    "--subject",
    default=None,
    help="Only this data subject's records: its subject memory, and the agent memory's records naming it.",
)
@actor_option
@json_option
@click.pass_obj
def show(
    cli: CliContext,
    agent: str,
    archives: bool,
    subject: str | None,
    actor: str | None,
    as_json: bool,
) -> None:
    """Print AGENT's memory as records (role, timestamp, content).

    The agent's own memory first, then each subject memory's (isolation =
    "subject"), each under the file it comes from. A read of personal data:
    under an audited policy it records memory.show (the agent, the subject,
    how many records, the actor; never the content) before printing.
    """
    database = _on_database(cli)
    if database is not None:  # read through its memory backend
        where = database.storage.where
        folder = None
        records = agent_records(
            None,
            agent,
            include_archives=archives,
            subject_id=subject,
            memory=database.memory_backend,
        )
    else:
        workspace = cli.file_workspace().absolute()
        where = str(workspace)
        folder = str(memory_md_path(agent, workspace).parent)
        records = agent_records(
            workspace,
            agent,
            include_archives=archives,
            store_factory=_lazy_store_factory(cli),
            subject_id=subject,
        )
    governance = cli.governance()
    # Recorded before anything is printed: an entry that cannot be written
    # (AuditWriteError) stops the command, so no unrecorded read reaches the screen.
    cli.audit_as(actor, governance.audit).record(
        "memory.show",
        agent=agent,
        subject_id=subject,
        outcome="ok",
        records=len(records),
        archives=archives,
        policy_id=governance.policy.id,
        policy_version=governance.policy.version,
    )
    if as_json:
        emit_json(
            {
                "agent": agent,
                "folder": folder,
                "records": [r.to_dict() for r in records],
            }
        )
        return
    console = _console()
    if not records:
        console.print(Text(f"Agent {agent} in {where} has no records."))
    else:
        archived = sum(1 for r in records if r.archived)
        detail = f" ({archived} archived)" if archives else ""
        noun = "record" if len(records) == 1 else "records"
        console.print(Text(f"{agent} in {where}: {len(records)} {noun}{detail}", style="bold"))
    source = None
    for number, record in enumerate(records, 1):
        if record.source != source:  # one heading per file
            source = record.source
            # A subject memory's file by its path in the workspace (agents/A/subjects/<p>/...).
            heading = f"agents/{agent}/{source}" if source.startswith("subjects/") else source
            console.rule(Text(heading), align="left")
        head = Text(f"#{number}  ")
        head.append(record.role, style="bold")
        head.append(f"  {record.timestamp}", style="dim")
        if record.id is not None:  # what `rectify --record` names it by
            head.append(f"  {record.id}", style="dim")
        console.print(head)
        # The content as stored, indented, never re-wrapped or parsed as markup.
        click.echo(textwrap.indent(record.content, "    ", lambda line: True) + "\n")
    if not archives:
        if database is not None:
            count = agent_info(None, agent, memory=database.memory_backend).archives
        else:
            count = agent_info(Path(where), agent, store_factory=_lazy_store_factory(cli)).archives
        if count:
            noun = "archive is" if count == 1 else "archives are"
            console.print(Text(f"{count} {noun} not shown; add --archives to include them."))


# -- demo -----------------------------------------------------------------------

DEMO_AGENT = "PaymentsAssistant"
DEMO_USER = "Human"
DEMO_TOOL = "Tool Executor"
DEMO_SYSTEM_PROMPT = (
    "You are PaymentsAssistant, a retail-banking assistant. You manage the "
    "customer's standing orders through tools and confirm every change."
)
DEMO_TURNS: tuple[tuple[str, str], ...] = (
    (
        DEMO_USER,
        "Hi, I'm Dana Reyes. Please move my rent standing order from the 1st to the "
        "28th of each month, starting next month.",
    ),
    (DEMO_AGENT, "Certainly. Let me look up your standing orders first."),
    (
        DEMO_TOOL,
        '{"tool": "list_standing_orders", "result": [{"id": "SO-4471", '
        '"payee": "Harbour Lettings Ltd", "amount": "950.00 EUR", "day": 1}]}',
    ),
    (
        DEMO_AGENT,
        "Found it: SO-4471 to Harbour Lettings Ltd, 950.00 EUR on the 1st. "
        "Shall I move it to the 28th from next month?",
    ),
    (DEMO_USER, "Yes please. Also remember that the rent goes up to 990 EUR in March."),
    (
        DEMO_TOOL,
        '{"tool": "update_standing_order", "id": "SO-4471", "day": 28, '
        '"effective": "next month", "status": "scheduled"}',
    ),
    (
        DEMO_AGENT,
        "Done: SO-4471 now runs on the 28th, starting next month. I have noted that "
        "the amount rises to 990.00 EUR in March and will remind you in February.",
    ),
)


DEMO_SUMMARY_TOKENS = 150
"""Budget of the demo's summary (small, so the compression shows)."""


def _demo_summary(conversation: Conversation) -> str:
    """The text the demo compacts ``conversation`` into.

    What ``ContextCompressor`` writes: its prefix and a summary of the turns
    by the offline ``local/extractive`` summarizer (no model, no network).
    """
    from .._memory import SUMMARY_PREFIX, ExtractiveSummarizer, Transcript

    transcript = Transcript(
        text=conversation.return_history_as_string(),
        messages=conversation.conversation_history[1:],  # without the system prompt
        user_role=DEMO_USER,
    )
    summary = ExtractiveSummarizer().summarize(
        transcript, max_tokens=DEMO_SUMMARY_TOKENS, temperature=None
    )
    return SUMMARY_PREFIX + summary


def _short(text: str, limit: int = 72) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def _mode(path: Path) -> str:
    return f"{stat.S_IMODE(path.lstat().st_mode):04o}"


def _tree(workspace: Path, root: Path) -> Tree:
    """Every folder and file under ``root`` (the agents' folder) with size and mode."""
    tree = Tree(Text(f"{workspace}/"))

    def add(node: Tree, folder: Path) -> None:
        for entry in sorted(folder.iterdir(), key=lambda p: (p.is_file(), p.name)):
            if entry.is_dir() and not entry.is_symlink():
                add(node.add(Text(f"{entry.name}/  {_mode(entry)}")), entry)
            else:
                size = human_size(entry.lstat().st_size)
                node.add(Text(f"{entry.name}  {size}  {_mode(entry)}"))

    if root.is_dir():
        add(tree.add(Text(f"{root.relative_to(workspace)}/  {_mode(root)}")), root)
    return tree


def _step(console: Console, number: int, title: str, note: str) -> None:
    console.print()
    console.rule(Text(f"{number}. {title}", style="bold"), align="left")
    console.print(Text(note, style="dim"))


@dataclass(frozen=True)
class _DemoSite:
    """What the demo says and shows where the storages differ; the cycle itself is one.

    ``steps`` are the (title, note) of the four steps; ``show`` prints what
    is kept once the cycle ran (step 4), from the store and its archive ids.
    """

    intro: list[Text]
    steps: tuple[tuple[str, str], tuple[str, str], tuple[str, str], tuple[str, str]]
    size_column: str
    show: Callable[[Console, AgentStore, list[str]], None]


def _run_cycle(
    console: Console,
    site: _DemoSite,
    agent: str,
    path: Path,
    governance: Governance | None,
    finish: Callable[[AgentStore], None] | None = None,
) -> None:
    """The demo's memory cycle for ``agent`` (named by ``path``), on whatever storage it has.

    Session 1 writes through, compaction archives and summarizes, session 2
    preloads, then ``site.show`` prints what is kept; ``finish`` (removing the
    agent) runs last, even when a step failed.
    """
    console.print(Panel(Group(*site.intro), title="governed-memory demo", expand=False))
    conversation = Conversation(
        name=f"{agent}_id_{uuid.uuid4().hex}_conversation",
        system_prompt=DEMO_SYSTEM_PROMPT,
        time_enabled=True,
        memory_md_path=path,
        governance=governance,
    )
    store = conversation.store
    assert store is not None  # a memory_md_path always has a store
    written, compacted, resumed_step, kept = site.steps
    try:
        # 1. Session one: every add() is stored before it returns.
        _step(console, 1, *written)
        turns = Table(show_header=True, expand=False)
        turns.add_column("role")
        turns.add_column("message")
        turns.add_column(site.size_column, justify="right")
        for role, content in DEMO_TURNS:
            conversation.add(role, content)
            info = store.stat()
            turns.add_row(
                Text(role), Text(_short(content)), Text(human_size(info.size if info else 0))
            )
        console.print(turns)

        # 2. Compaction: archive, then replace the memory by a header + the summary.
        _step(console, 2, *compacted)
        tokens_before = conversation.token_count
        summary = _demo_summary(conversation)
        conversation.compact(summary)
        archived = store.list_archives()
        for archive_id in archived:
            console.print(Text(f"archived  {store.source(archive_id)}"))
        body = summary.split("\n\n", 1)[-1]  # without the compressor's prefix
        console.print(Text(f"summary   {_short(body, 68)}"))
        console.print(
            Text(
                f"tokens    {tokens_before} -> {conversation.token_count} (counted offline, tiktoken)"
            )
        )

        # 3. Session two: a new Conversation preloads the memory.
        resumed = Conversation(
            name=f"{agent}_id_{uuid.uuid4().hex}_conversation",
            system_prompt=DEMO_SYSTEM_PROMPT,
            time_enabled=True,
            memory_md_path=path,
            governance=governance,
        )
        _step(console, 3, *resumed_step)
        preload = resumed.conversation_history[-1]
        index = len(resumed.conversation_history) - 1
        console.print(
            Panel(
                Text(str(preload["content"])),
                title=f"conversation_history[{index}]  role={preload['role']}",
                title_align="left",
            )
        )
        resumed.memory_md_path = None

        # 4. What is kept, as the store keeps it.
        _step(console, 4, *kept)
        site.show(console, store, archived)
    finally:
        try:
            if finish is not None:
                finish(store)
        finally:
            conversation.memory_md_path = None  # closes the store


def _file_site(
    workspace: Path,
    path: Path,
    temporary: bool,
    policy_given: bool,
    governance: Governance | None,
) -> _DemoSite:
    """The demo on a workspace's folders: MEMORY.md, archive/, the files on disk."""
    where = "temporary, removed at the end" if temporary else "kept after the demo"
    intro = [
        Text(f"Workspace  {workspace}"),
        Text(f"           ({where})"),
        Text(f"Agent      {DEMO_AGENT}"),
        Text("Mode       default policy: plaintext, byte-compatible with swarms 16.0.3"),
        Text("Network    none: no model calls, nothing leaves this machine"),
    ]
    if policy_given:
        intro.append(Text("Note       --policy is not applied: the demo shows the default mode"))
    if governance is not None:
        intro.append(
            Text("Note       the configured policy is not applied: the demo shows the default mode")
        )

    def show(console: Console, store: AgentStore, archived: list[str]) -> None:
        # The agents' folder and the files are the ones the store named, not paths built here.
        console.print(_tree(workspace, path.parent.parent))
        for file in [*(path.parent / store.source(a) for a in archived), path]:
            console.print(
                Panel(
                    # Exactly the file's text; only the trailing blank lines are dropped.
                    Text(file.read_text(encoding="utf-8").rstrip("\n")),
                    title=str(file.relative_to(workspace)),
                    title_align="left",
                )
            )

    return _DemoSite(
        intro=intro,
        steps=(
            (
                "Session 1: messages are written through to MEMORY.md",
                "Each add() appends one block under the agent folder's lock before it returns. "
                "The system prompt stays in memory only.",
            ),
            (
                "Compaction: the history becomes a summary, the raw log is archived",
                "The offline local/extractive summarizer condenses the turns (no model, no "
                "network). compact() first writes the old MEMORY.md to archive/ (fsynced), then "
                "atomically replaces MEMORY.md with a fresh header and the summary.",
            ),
            (
                "Session 2: a restarted agent preloads its memory",
                "A new Conversation with the same memory_md_path injects MEMORY.md as one System "
                "message after the system prompt; it is never written back.",
            ),
            (
                "On disk",
                "Folders are created 0700 and files 0600 whatever the umask; the reference "
                "leaves them world-readable.",
            ),
        ),
        size_column="MEMORY.md size",
        show=show,
    )


def _stored_table(store: AgentStore, archived: list[str]) -> Table:
    """What the store keeps of the agent: each archive and the active memory, size and time."""
    table = Table(show_header=True, expand=False)
    table.add_column("kept as")
    table.add_column("stored size", justify="right")
    table.add_column("last changed")
    for archive_id in [*archived, None]:
        info = store.stat(archive_id)
        if info is None:
            continue
        when = _dt.datetime.fromtimestamp(info.modified).isoformat(sep=" ", timespec="seconds")
        table.add_row(Text(store.source(archive_id)), Text(human_size(info.size)), Text(when))
    return table


def _show_stored(console: Console, store: AgentStore, archived: list[str]) -> None:
    """Step 4 on a database: the rows' sizes, and their texts read back through the store."""
    console.print(_stored_table(store, archived))
    texts = [(store.source(a), store.read_archive(a)) for a in archived]
    texts.append((store.source(), store.read_memory() or ""))
    for source, text in texts:
        console.print(Panel(Text(text.rstrip("\n")), title=source, title_align="left"))


def _database_site(governance: Governance, agent: str, keep: bool) -> _DemoSite:
    """The demo on the deployment's database: rows, transactions, any host."""
    where = governance.storage.where
    kept = "kept after the demo" if keep else "removed at the end (--keep keeps it)"
    mode = (
        "encrypted, as the deployment's policy (only ciphertext in the database)"
        if governance.policy.encryption.enabled
        else "plaintext"
    )
    intro = [
        Text(f"Storage    {where}"),
        Text(f"Agent      {agent} ({kept})"),
        Text(f"Mode       default policy: {mode}"),
        Text("Network    only the database: no model calls"),
        Text("Note       the configured policy is not applied: the demo shows the default mode"),
    ]
    return _DemoSite(
        intro=intro,
        steps=(
            (
                "Session 1: messages are committed to the database",
                "Each add() appends one block in a transaction under the agent's advisory lock; "
                "it returns once the transaction has committed. The system prompt stays in "
                "memory only.",
            ),
            (
                "Compaction: the history becomes a summary, the raw log is archived",
                "The offline local/extractive summarizer condenses the turns. compact() archives "
                "the memory and replaces it with a fresh header and the summary in one "
                "transaction.",
            ),
            (
                "Session 2: a restarted agent (on any host) preloads its memory",
                "A new Conversation of the same agent, on any host with the same database URL, "
                "injects the stored memory as one System message after the system prompt.",
            ),
            (
                "In the database",
                f"Rows of the governed_memory schema in {where} (sizes as stored), their texts "
                "read back through the store; nothing of the agent's memory is on this disk.",
            ),
        ),
        size_column="stored size",
        show=_show_stored,
    )


def _run_database_demo(console: Console, governance: Governance, keep: bool) -> str:
    """The demo's memory cycle on the deployment's database; the agent's name.

    The cycle of the file demo, under the built-in default policy, for a fresh
    agent whose memory lives in the database; what is shown in the end is
    what the store keeps there (read back through it). Nothing is written to
    the local disk. The schema must exist already: the first statement
    refuses a database without it, naming ``governed-memory db upgrade``
    (schema changes are the admin's, with the owner's role).
    """
    governance.memory_backend.agents()  # connects and checks the schema before anything is shown
    agent = f"{DEMO_AGENT}-{uuid.uuid4().hex[:8]}"
    path = memory_md_path(agent, governance.workspace)  # names the agent; nothing is kept there

    def remove(store: AgentStore) -> None:
        if not keep:
            with store.lock():
                store.delete()

    _run_cycle(console, _database_site(governance, agent, keep), agent, path, governance, remove)
    return agent


@click.command("demo")
@click.option(
    "--keep",
    is_flag=True,
    help="On a database deployment: keep the demo's agent in the database (removed otherwise).",
)
@click.pass_obj
def demo(cli: CliContext, keep: bool) -> None:
    """Run the memory cycle offline: write-through, compaction, preload, files on disk.

    Uses a temporary workspace that is removed afterwards, unless the global
    --workspace option names one (which is then kept). With
    GOVERNED_MEMORY_DATABASE_URL set, the cycle runs on the database instead,
    for a fresh agent, and shows what is stored there.
    """
    console = _console()
    database = _demo_database(cli)
    if database is not None:
        agent = _run_database_demo(console, database, keep)
        where = database.storage.where
        console.print()
        if keep:
            console.print(
                Text(
                    f"The agent {agent} is kept in {where}. Explore it with:\n"
                    "  governed-memory agents\n"
                    f"  governed-memory show {agent} --archives"
                )
            )
        else:
            console.print(Text(f"The agent {agent} was removed from {where}."))
        return
    temporary = cli.workspace_arg is None
    workspace = (
        Path(tempfile.mkdtemp(prefix="governed-memory-demo-"))
        if temporary
        else cli.workspace.absolute()
    )
    try:
        governance = cli.demo_governance(workspace)
        path = memory_md_path(DEMO_AGENT, workspace)
        site = _file_site(workspace, path, temporary, cli.policy_arg is not None, governance)
        _run_cycle(console, site, DEMO_AGENT, path, governance)
    finally:
        if temporary:
            shutil.rmtree(workspace, ignore_errors=True)
    console.print()
    if temporary:
        console.print(
            Text(
                "The temporary workspace was removed. To keep the files and explore them:\n"
                "  governed-memory --workspace ./demo-workspace demo\n"
                "  governed-memory --workspace ./demo-workspace agents\n"
                f"  governed-memory --workspace ./demo-workspace show {DEMO_AGENT} --archives"
            )
        )
    else:
        console.print(
            Text(
                f"Files kept in {workspace}. Explore them with:\n"
                f"  governed-memory --workspace {workspace} agents\n"
                f"  governed-memory --workspace {workspace} show {DEMO_AGENT} --archives"
            )
        )


commands: list[click.Command] = [demo, agents, show]
