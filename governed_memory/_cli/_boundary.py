"""The CLI's edge: hostile input and foreign errors become one-line messages, never tracebacks.

Three guards, applied by :func:`harden` to each command as it is loaded:

* every free-text parameter (``click.STRING``) refuses text that cannot be
  stored: a lone surrogate (what Python makes of bytes that are not UTF-8 in
  ``argv``) or a NUL character;
* every command that reads a workspace refuses one that does not exist (a
  misspelt ``--workspace`` would otherwise show an empty plan and exit 0),
  except the commands listed in :data:`CREATES_WORKSPACE` and
  :data:`NO_WORKSPACE` (docs/cli.md lists them too);
* :func:`foreign_error` turns an error the library let through (an
  ``OSError`` from the disk, a damaged file it did not check) into a message
  naming the value and a fix, with exit status 1.
"""

from __future__ import annotations

import errno
import functools
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .._errors import ConfigurationError, NotFoundError

if TYPE_CHECKING:
    from ._context import CliContext

    _TextBase = click.ParamType[Any, str]
else:  # click < 8.2 has no generic ParamType
    _TextBase = click.ParamType

__all__ = [
    "COMMAND_KEY",
    "CREATES_WORKSPACE",
    "NO_WORKSPACE",
    "check_folder_setting",
    "foreign_error",
    "global_option_hint",
    "harden",
    "walk",
]

CREATES_WORKSPACE = frozenset(
    {"demo", "chat", "consent grant", "consent withdraw", "hold place", "requests open"}
)
"""Commands that create the workspace when it does not exist yet (they write to it)."""

NO_WORKSPACE = frozenset(
    {
        "keys generate",
        # The console's accounts file is its own, outside any workspace.
        "console add-user",
        "console remove-user",
        "console set-role",
        "policy check",
        "policy list",
        "policy show",
        # The audit commands read a folder (--dir, else the workspace's) and say
        # themselves when it holds no log; lookup and keygen need none.
        "audit verify",
        "audit tail",
        "audit export",
        "audit lookup",
        "audit repair",
        "audit keygen",
        "audit checkpoint",
        # Signed evidence: the signing key lives outside the workspace, and a
        # verifier holds a receipt file and a public key, never a workspace.
        "keys signing-keygen",
        "keys signing-public",
        "verify receipt",
        # Lists nothing for a missing workspace and says the folder does not
        # exist (exit 0: scripts count agents with it).
        "agents",
        # The database's schema: named by the settings, no workspace involved.
        "db upgrade",
        "db status",
    }
)
"""Commands that do not read the workspace, or check their folder themselves."""


COMMAND_KEY = "governed_memory.command"
"""``click.Context.meta`` key of the command being run ("erasures list"), for messages."""


class Text(_TextBase):
    """A string parameter that refuses text no file or log can hold."""

    name = "text"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value)
        if "\x00" in text:
            self.fail(
                f"{text!r} contains a NUL character; remove it (no id or name may hold one)",
                param,
                ctx,
            )
        try:
            text.encode("utf-8")
        except UnicodeEncodeError as exc:
            bad = text[exc.start : exc.end]
            try:  # bytes that were not UTF-8 in argv arrive as U+DC80..U+DCFF
                what = f"bytes {bad.encode('utf-8', 'surrogateescape')!r}"
            except UnicodeEncodeError:
                what = f"lone surrogate U+{ord(bad[0]):04X}"
            self.fail(
                f"{text!r} is not valid UTF-8 text ({what} at position {exc.start}); "
                "ids and names are stored as UTF-8: check the terminal's encoding (LANG, "
                "LC_ALL) or the script that built the argument",
                param,
                ctx,
            )
        return text


TEXT = Text()


def walk(group: click.Group, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, click.Command]]:
    """Every command under ``group`` (groups included), as ("erasures list", command)."""
    for name, command in sorted(group.commands.items()):
        path = (*prefix, name)
        yield " ".join(path), command
        if isinstance(command, click.Group):
            yield from walk(command, path)


def harden(command: click.Command, path: str) -> None:
    """Apply the text and workspace guards to ``command`` (named ``path``) and every command under it.

    Called once per top-level command, when it is first loaded (``_lazy``).
    """
    tree = [(path, command)]
    if isinstance(command, click.Group):
        tree.extend(walk(command, tuple(path.split())))
    for name, node in tree:
        for param in node.params:
            if param.type is click.STRING:
                param.type = TEXT
        if isinstance(node, click.Group) or node.callback is None:
            continue
        node.callback = _guarded(node.callback, name)


def _guarded(callback: Callable[..., Any], path: str) -> Callable[..., Any]:
    @functools.wraps(callback)
    def run(*args: Any, **kwargs: Any) -> Any:
        from ._context import CliContext

        ctx = click.get_current_context()
        ctx.meta[COMMAND_KEY] = path  # meta is shared by the whole context chain
        cli = ctx.find_object(CliContext)
        if cli is not None and path not in NO_WORKSPACE:
            check_workspace(cli, creates=path in CREATES_WORKSPACE)
        return callback(*args, **kwargs)

    return run


def check_workspace(cli: CliContext, *, creates: bool) -> None:
    """Refuse a workspace that is not a folder, or (unless ``creates``) does not exist."""
    workspace = (cli.settings().workspace_dir or cli.workspace).absolute()
    if workspace.is_dir() or cli.storage().files is None:
        return  # a database keeps everything: no local folder is needed
    if workspace.exists() or not _creatable(workspace):
        raise ConfigurationError(
            f"workspace {workspace} is not a folder; give the workspace folder with "
            "--workspace (before the command) or $WORKSPACE_DIR"
        )
    if not creates:
        raise NotFoundError(
            f"workspace {workspace} does not exist; check --workspace (or $WORKSPACE_DIR) for a "
            "typo. A workspace is created by its first write: a Conversation or `governed-memory "
            "chat`, `consent grant`, `hold place`, or `governed-memory --workspace "
            f"{workspace} demo`"
        )


def check_folder_setting(setting: str, path: Path | None) -> None:
    """Refuse a folder setting that names a file (``/dev/null``) or lies under one."""
    if path is None or path.is_dir():
        return
    if path.exists() or not _creatable(path):
        raise ConfigurationError(
            f"{setting}={path} is not a folder (it is a file, or lies under one); set it to a "
            "folder, which is created 0700 if it does not exist yet"
        )


def _creatable(path: Path) -> bool:
    """Whether the nearest existing ancestor of ``path`` is a folder (so it could be made)."""
    for parent in path.absolute().parents:
        if parent.exists():
            return parent.is_dir()
    return True


_HINTS = {
    errno.ENOSPC: "free space on that disk and run the command again",
    errno.EDQUOT: "free space within your disk quota and run the command again",
    errno.EACCES: "check the owner and mode of that path (the workspace is meant to be 0700)",
    errno.EPERM: "check the owner and mode of that path (the workspace is meant to be 0700)",
    errno.EROFS: "the file system is read-only: remount it read-write or use another folder",
    errno.ENOTDIR: (
        "a part of that path is a file, not a folder: check --workspace and the "
        "GOVERNED_MEMORY_*_DIR settings"
    ),
    errno.EISDIR: "that path is a folder where a file was expected: check the path given",
    errno.ENAMETOOLONG: "use a shorter path or name",
    errno.ELOOP: "that path is a symbolic link loop: replace the link by a folder",
}


_AFTER = {
    "erase": "; an erasure it interrupted is finished by `governed-memory erasures resume`",
    "erasures resume": "",
    "purge": "; the next `governed-memory purge` finishes an interrupted purge first",
}
"""What to add to a disk error, per command: how its interrupted work is finished."""


def foreign_error(exc: BaseException, command: str = "") -> str:
    """The one-line message for an error that is not a :class:`GovernedMemoryError`."""
    if isinstance(exc, OSError):
        where = exc.filename if exc.filename is not None else "the disk"
        reason = exc.strerror or str(exc)
        hint = _HINTS.get(exc.errno or 0, "check that path and run the command again")
        return f"{reason}: {where}; {hint}{_AFTER.get(command, '')}"
    return (
        f"unexpected {type(exc).__name__}: {exc} (at {_where(exc)}). A file under the "
        "workspace may be damaged or hand-edited: restore it from a backup. If none is, "
        "this is a bug in governed-memory: please report this line"
    )


def _where(exc: BaseException) -> str:
    import traceback  # only on this error path: it costs every start-up ~10 ms otherwise

    frames = [
        f"{Path(frame.filename).parent.name}/{Path(frame.filename).name}:{frame.lineno}"
        for frame in traceback.extract_tb(exc.__traceback__)
        if "governed_memory" in frame.filename
    ]
    return frames[-1] if frames else "unknown"


def global_option_hint(exc: click.NoSuchOption, group: click.Group) -> click.NoSuchOption:
    """``exc``, saying that a global option of ``group`` goes before the command if it is one."""
    names = {name for param in group.params for name in param.opts}
    if exc.option_name not in names:
        return exc
    command = exc.ctx.command_path.split(" ", 1)[-1] if exc.ctx is not None else "COMMAND"
    return click.NoSuchOption(
        exc.option_name,
        message=(
            f"{exc.message.rstrip('.')}. {exc.option_name} is a global option: put it before "
            f"the command, e.g. `governed-memory {exc.option_name} VALUE {command} ...`"
        ),
        ctx=exc.ctx,
    )
