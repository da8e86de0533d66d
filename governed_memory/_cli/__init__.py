"""The ``governed-memory`` command line: a thin layer over the public API.

Each command group lives in its own module here, listed in ``_lazy.COMMANDS``
and imported only when it runs. A command builds settings, calls the library, and renders a table (or JSON with
``--json``). :class:`GovernedMemoryError` becomes a one-line message and exit
status 1; usage errors exit 2 (click's convention). Anything else that
reaches this layer (a disk error, a damaged file the library did not check)
is a one-line message and exit status 1 too, never a traceback (see
``_boundary``).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import click

from .._base import VERSION
from .._errors import GovernedMemoryError
from ._boundary import COMMAND_KEY, foreign_error, global_option_hint
from ._context import CliContext
from ._lazy import COMMANDS, LazyCommands, LazyGroup

__all__ = ["main"]


class _Group(LazyGroup):
    """Turns library errors into one line on stderr and exit status 1."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except GovernedMemoryError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(1)
        except click.NoSuchOption as exc:
            hinted = global_option_hint(exc, self)
            if hinted is exc:
                raise
            raise hinted from None
        except (click.exceptions.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            click.echo(f"error: {foreign_error(exc, ctx.meta.get(COMMAND_KEY, ''))}", err=True)
            sys.exit(1)


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--workspace",
    type=click.Path(path_type=Path, file_okay=False),
    default=None,
    help="Workspace folder (default: $WORKSPACE_DIR, else ./agent_workspace).",
)
@click.option(
    "--policy",
    "policy_path",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help=(
        "Policy file, or a shipped policy's name: default, regulated, hipaa "
        "(default: $GOVERNED_MEMORY_POLICY, else the built-in default policy)."
    ),
)
@click.version_option(VERSION, package_name="governed-memory")
@click.pass_context
def main(ctx: click.Context, workspace: Path | None, policy_path: Path | None) -> None:
    """Governed persistent memory for LLM agents."""
    ctx.obj = CliContext(workspace_arg=workspace, policy_arg=policy_path)
    ctx.call_on_close(ctx.obj.close)


# The commands are imported when one runs, not when the CLI starts (``_lazy``): ``--help``
# and ``--version`` load no command module.
main.commands = LazyCommands(COMMANDS)
