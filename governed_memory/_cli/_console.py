"""The ``console`` command: serve the privacy office's console; manage its local accounts.

``governed-memory console`` serves the web console (docs/console.md) over the
workspace or database the global options and settings name, on 127.0.0.1 by
default. ``console add-user``, ``remove-user`` and ``set-role`` edit the local
accounts file (argon2id hashes, mode 0600) the console signs users in from.

The console sub-package and its web stack (the ``console`` extra) are
imported inside the commands: the CLI starts without them.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .._errors import ConfigurationError
from ._boundary import check_workspace
from ._context import CliContext

if TYPE_CHECKING:
    from governed_memory.console import ConsoleConfig

__all__ = ["console_group"]

_ROLES = ("privacy-officer", "administrator", "auditor")
_EXTRA = (
    "the console needs the `console` extra; install it with pip install 'governed-memory[console]'"
)

config_option = click.option(
    "--config",
    "config_file",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="The console's TOML settings (default: $GOVERNED_MEMORY_CONSOLE_CONFIG_FILE; see "
    "docs/console.md).",
)


def _load(config_file: Path | None, **overrides: Any) -> ConsoleConfig:
    try:
        from governed_memory.console import load_console_config
    except ImportError as exc:
        raise ConfigurationError(f"{_EXTRA} ({exc})") from None
    given = {k: v for k, v in overrides.items() if v is not None}
    return load_console_config(config_file, **given)


@click.group("console", invoke_without_command=True)
@click.option("--host", default=None, help="Address to listen on (default 127.0.0.1).")
@click.option("--port", type=click.IntRange(0, 65535), default=None, help="Port (default 8765).")
@config_option
@click.pass_context
def console_group(
    ctx: click.Context, host: str | None, port: int | None, config_file: Path | None
) -> None:
    """Serve the privacy office's console in the browser (see docs/console.md)."""
    if ctx.invoked_subcommand is not None:
        ctx.meta["console_config_file"] = config_file
        return
    cli = ctx.find_object(CliContext)
    assert cli is not None
    check_workspace(cli, creates=False)
    config = _load(config_file, host=host, port=port)
    governance = cli.governance()
    from governed_memory.console import create_app

    app = create_app(config, governance)
    import uvicorn

    scheme = "https" if config.tls else "http"
    click.echo(
        f"console: serving {governance.storage.where} at {scheme}://{config.host}:{config.port}/ "
        "(Ctrl-C stops it)",
        err=True,
    )
    uvicorn.run(
        app,
        host=config.host,
        port=config.port,
        ssl_certfile=str(config.tls_cert) if config.tls_cert else None,
        ssl_keyfile=str(config.tls_key) if config.tls_key else None,
        proxy_headers=config.behind_proxy,
        forwarded_allow_ips=list(config.forwarded_allow_ips) or None,
        server_header=False,
        log_level="info",
    )


def _accounts(accounts: Path | None, config_file: Path | None) -> Path:
    if accounts is not None:
        return accounts
    path = click.get_current_context().meta.get("console_config_file")
    found = _load(config_file or path).accounts_file
    if found is None:
        raise ConfigurationError(
            "the console settings name no accounts_file; set accounts_file in the console's "
            "config (--config FILE) or pass --accounts FILE"
        )
    return found


def _hashing(config_file: Path | None) -> Any:
    """The console settings' ``password_hashing`` when a settings file is given, else None."""
    path = config_file or click.get_current_context().meta.get("console_config_file")
    return _load(path).password_hashing if path is not None else None


accounts_option = click.option(
    "--accounts",
    type=click.Path(path_type=Path, dir_okay=False),
    default=None,
    help="The accounts file (default: accounts_file of the console settings).",
)


def _password(from_stdin: bool) -> str:
    if from_stdin:
        return sys.stdin.readline().rstrip("\n")
    value: str = click.prompt("Password", hide_input=True, confirmation_prompt=True)
    return value


@console_group.command("add-user")
@click.argument("name")
@click.option("--role", required=True, type=click.Choice(_ROLES), help="The user's one role.")
@click.option(
    "--password-stdin", is_flag=True, help="Read the password from the first line of stdin."
)
@accounts_option
@config_option
def add_user(
    name: str, role: str, password_stdin: bool, accounts: Path | None, config_file: Path | None
) -> None:
    """Add (or replace) the local account NAME with ROLE; asks for the password."""
    from governed_memory.console import add_user as add

    path = _accounts(accounts, config_file)
    account = add(path, name, role, _password(password_stdin), hashing=_hashing(config_file))
    click.echo(f"added {account.name} ({account.role.value}) to {path}")


@console_group.command("remove-user")
@click.argument("name")
@accounts_option
@config_option
def remove_user(name: str, accounts: Path | None, config_file: Path | None) -> None:
    """Remove the local account NAME; its sessions end at their next request."""
    from governed_memory.console import remove_user as remove

    path = _accounts(accounts, config_file)
    remove(path, name)
    click.echo(f"removed {name} from {path}")


@console_group.command("set-role")
@click.argument("name")
@click.option("--role", required=True, type=click.Choice(_ROLES), help="The new role.")
@accounts_option
@config_option
def set_role(name: str, role: str, accounts: Path | None, config_file: Path | None) -> None:
    """Change the role of the local account NAME; its sessions end at their next request."""
    from governed_memory.console import set_role as change

    path = _accounts(accounts, config_file)
    change(path, name, role)
    click.echo(f"{name} is now {role}")


commands: list[click.Command] = [console_group]
