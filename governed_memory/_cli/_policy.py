"""Policy commands: ``policy check FILE``, ``policy show``, ``policy list``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
from pydantic import SecretStr

from .._policy import (
    OVERRIDABLE_SECTIONS,
    Policy,
    Settings,
    load_policy,
    resolve_policy,
    shipped_policies,
)
from ._context import CliContext
from ._render import emit_json, emit_table, json_option

__all__ = ["commands"]

_SETTINGS_SHOWN = (
    "policy",
    "workspace_dir",
    "database_url",
    "master_key",
    "master_key_file",
    "audit_key",
    "signing_key",
    "signing_key_file",
    "otlp_endpoint",
    "otlp_headers",
    "service_name",
)


@click.group("policy")
def policy_group() -> None:
    """Validate and inspect policies (see docs/policies.md)."""


@policy_group.command("check")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False))
@json_option
def check(file: Path, as_json: bool) -> None:
    """Validate FILE (a path or a shipped name); exit 1 with the reason if it is invalid."""
    policy = load_policy(file)
    storage = policy.storage.backend
    if as_json:
        emit_json(
            {
                "valid": True,
                "file": policy.source,
                "id": policy.id,
                "version": policy.version,
                "storage": storage,
            }
        )
    else:
        click.echo(
            f"ok: {policy.source} is a valid policy (id {policy.id}, version {policy.version}); "
            + (
                f"storage: {storage}"
                if storage is not None
                else "storage: not set (files; postgres when GOVERNED_MEMORY_DATABASE_URL is set)"
            )
        )


def _parse_set(values: tuple[str, ...]) -> dict[str, dict[str, Any]]:
    result: dict[str, dict[str, Any]] = {}
    for item in values:
        key, sep, raw = item.partition("=")
        section, dot, name = key.strip().partition(".")
        if not sep or not dot or not name:
            raise click.BadParameter(
                f"{item!r} is not SECTION.KEY=VALUE; write e.g. retention.archives_max_age=30d",
                param_hint="--set",
            )
        if section not in OVERRIDABLE_SECTIONS:
            raise click.BadParameter(
                f"section {section!r} cannot be overridden; use one of {list(OVERRIDABLE_SECTIONS)}",
                param_hint="--set",
            )
        try:
            value: Any = json.loads(raw)
        except ValueError:
            value = raw
        result.setdefault(section, {})[name] = value
    return result


def _setting_value(settings: Settings, name: str) -> str:
    value = getattr(settings, name)
    if value is None:
        return "(not set)"
    if isinstance(value, SecretStr):
        return "********** (set)"
    return str(value)


@policy_group.command("show")
@click.option(
    "--set",
    "assignments",
    multiple=True,
    metavar="SECTION.KEY=VALUE",
    help="Override one policy key, as a constructor argument would (repeatable).",
)
@json_option
@click.pass_obj
def show(ctx: CliContext, assignments: tuple[str, ...], as_json: bool) -> None:
    """Print the effective policy and settings, and where each value came from.

    Sources: built-in default, policy file, environment (GOVERNED_MEMORY_*),
    argument (--policy, --workspace, --set). Secrets are never printed.
    """
    settings = ctx.settings(**_parse_set(assignments))
    resolved = resolve_policy(settings)
    values = resolved.policy.model_dump(mode="json")
    rows: list[dict[str, Any]] = []
    for key, source in resolved.sources.items():
        section, name = key.split(".", 1)
        rows.append({"key": key, "value": values[section][name], "source": source})
    setting_rows = []
    for name in _SETTINGS_SHOWN:
        if name in settings.model_fields_set:
            source = settings.source_of(name)
        else:
            source = "built-in default"
        setting_rows.append(
            {"key": name, "value": _setting_value(settings, name), "source": source}
        )
    setting_rows.append(_storage_row(settings, resolved.policy, resolved.sources))
    if as_json:
        emit_json(
            {
                "policy": {"id": resolved.policy.id, "version": resolved.policy.version},
                "source": resolved.policy.source,
                "values": rows,
                "settings": setting_rows,
            }
        )
        return
    title = f"policy {resolved.policy.id} v{resolved.policy.version} ({resolved.policy.source})"
    emit_table(
        title,
        ["key", "value", "source"],
        [(r["key"], _cell(r["value"]), r["source"]) for r in rows],
    )
    emit_table(
        "settings", ["setting", "value", "source"], [tuple(r.values()) for r in setting_rows]
    )


def _storage_row(settings: Settings, policy: Policy, sources: dict[str, str]) -> dict[str, Any]:
    """The backend in effect and what chose it (refused, naming both, when they contradict)."""
    from .._governance import storage_backend

    backend = storage_backend(settings, policy)
    if policy.storage.backend is not None:
        source = sources.get("storage.backend", "policy file")
    elif settings.database_url is not None:
        source = "database_url is set"
    else:
        source = "built-in default"
    return {"key": "storage", "value": backend, "source": source}


def _cell(value: Any) -> str:
    if value is None:
        return "none"
    if isinstance(value, str):
        return value
    return json.dumps(value)


@policy_group.command("list")
@json_option
def list_shipped(as_json: bool) -> None:
    """List the policies shipped with governed_memory (usable by name with --policy)."""
    rows = []
    for name, path in shipped_policies().items():
        policy = load_policy(path)
        rows.append(
            {
                "name": name,
                "version": policy.version,
                "description": policy.policy.description,
                "file": str(path),
            }
        )
    if as_json:
        emit_json(rows)
    else:
        emit_table(
            "shipped policies",
            ["name", "version", "description"],
            [(r["name"], r["version"], r["description"]) for r in rows],
        )


commands: list[click.Command] = [policy_group]
