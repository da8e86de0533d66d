"""The ``governed-memory`` command line: a thin layer over the public API.

Each command group lives in its own module here and is registered below. A
command builds settings, calls the library, and renders a table (or JSON with
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

from .._errors import GovernedMemoryError
from ._boundary import COMMAND_KEY, foreign_error, global_option_hint, harden
from ._context import CliContext

__all__ = ["main"]


class _Group(click.Group):
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
@click.version_option(package_name="governed-memory")
@click.pass_context
def main(ctx: click.Context, workspace: Path | None, policy_path: Path | None) -> None:
    """Governed persistent memory for LLM agents."""
    ctx.obj = CliContext(workspace_arg=workspace, policy_arg=policy_path)
    _export_spans(ctx, ctx.obj)


def _export_spans(ctx: click.Context, cli: CliContext) -> None:
    """Ship this command's spans to the configured OTLP collector, flushed before exit.

    GOVERNED_MEMORY_OTLP_ENDPOINT (else OTEL_EXPORTER_OTLP_ENDPOINT) names the
    collector; without one nothing is set up. The provider becomes the
    process's global one (the CLI is the application here), so every
    Governance the command builds, and the ``scheduler run`` daemon's, emits
    to it; it is shut down, flushing the batch, when the command ends, also
    on an error or SIGTERM.
    """
    from .._policy import Settings

    try:
        settings = Settings()
    except GovernedMemoryError:
        return  # the command itself reports the settings error, with its context
    if not settings.otlp_endpoint:
        return
    from .._audit import configure_otlp

    provider = configure_otlp(settings, set_global=True)
    ctx.call_on_close(provider.shutdown)


def _register() -> None:
    # One import per command module; each defines ``commands``.
    from . import (
        _audit,
        _chat,
        _consent,
        _evidence,
        _isolate,
        _keys,
        _memory,
        _policy,
        _rectify,
        _requests,
        _retention,
        _subjects,
    )

    modules = (
        _memory,
        _isolate,
        _policy,
        _consent,
        _subjects,
        _rectify,
        _requests,
        _retention,
        _keys,
        _chat,
        _audit,
        _evidence,
    )
    for module in modules:
        for command in module.commands:
            main.add_command(command)
    harden(main)


_register()
