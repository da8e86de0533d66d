"""The CLI is a thin layer: it imports public names, or internal ones listed here with a reason.

Every module of ``governed_memory/_cli`` is parsed with ``ast`` (imports inside
functions and under ``TYPE_CHECKING`` included). A name imported from another
part of the package must be public (``governed_memory.__all__``, possibly
under its public alias) or stand in :data:`INTERNAL` below, which says why the
command needs it. No ``_``-prefixed name and no private module is imported.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

import governed_memory

CLI_DIR = Path(governed_memory.__file__).parent / "_cli"
CLI_MODULES = sorted(CLI_DIR.glob("*.py"))

# (sub-package, name) -> why a command needs this internal name. _audit and _keys
# also document theirs "for the CLI" in their interface docstrings (checked below).
INTERNAL: dict[tuple[str, str], str] = {
    ("_protocols", "DeploymentStorage"): (
        "CliContext.storage's return type: the deployment's storage, opened without a Governance"
    ),
    ("_governance", "storage_for"): (
        "keys status and db status name the storage without building a Governance, which needs "
        "the audit key under an audited policy"
    ),
    ("_governance", "file_workspace"): (
        "the commands that walk a workspace's files (rotation, encrypt/decrypt-workspace, "
        "agents, show) run on the file storage's folder and refuse a database backend"
    ),
    ("_governance", "storage_backend"): (
        "db upgrade and db status: which backend the settings and [storage] choose, validated"
    ),
    (
        "_postgres",
        "Database",
    ): "db upgrade and db status connect to the configured server; migrate-storage opens it",
    ("_postgres", "upgrade_schema"): "db upgrade applies the schema's migrations",
    ("_postgres", "schema_version"): "db status prints the database's schema version",
    ("_postgres", "SCHEMA_VERSION"): "db status prints this release's schema version",
    ("_migrate", "migrate_storage"): "migrate-storage runs the operations layer's migration",
    ("_migrate", "workspace_end"): "migrate-storage: the workspace's stores, keys and audit log",
    ("_migrate", "database_end"): "migrate-storage: the database's stores, keys and audit log",
    ("_retention", "JournalFolder"): (
        "migrate-storage refuses a workspace whose purge plan is pending (the retention "
        "layer's journal, a sibling the migration package does not import)"
    ),
    ("_base", "VERSION"): (
        "--version prints the package's version without importing importlib.metadata and "
        "scanning every installed distribution (CLI start-up, docs/cli.md)"
    ),
    ("_base", "parse_duration"): (
        "audit export --since: why an age the log's reader refuses is refused (over 1000y), "
        "in the duration grammar's own words"
    ),
    ("_audit", "audit_key_from_settings"): (
        "the audit key from settings: the audit commands read the log without building a "
        "Governance, which would record policy.load"
    ),
    ("_audit", "audit_keys_from_settings"): (
        "audit verify, lookup and repair also accept the audit key derived from the previous "
        "master key during and after a master key rotation (versioned audit keys)"
    ),
    ("_audit", "pinned_audit_key_text"): (
        "audit keygen --from-master-key prints the derived audit key so an admin can pin it"
    ),
    ("_audit", "audit_log_dir"): (
        "the audit folder from the policy and workspace, for the same reason"
    ),
    ("_audit", "audit_log_exists"): (
        "tells a missing log from an empty one without the CLI knowing the log's file names"
    ),
    ("_audit", "AuditLogLike"): (
        "the audit commands open the log in one place (_open_log) as any audit storage, so "
        "the file log and the database's serve the same commands"
    ),
    ("_audit", "verify_storage"): "audit verify checks the log of any audit storage",
    ("_audit", "export_since"): "audit export --since: an ISO time or an age like 30d",
    ("_audit", "export_lines"): "audit export: the entries since a time, as recorded",
    ("_audit", "write_export"): "audit export --out: the audit layer writes the file, 0600",
    ("_audit", "ActorSink"): (
        "the commands an operator runs on keys or personal data (keys rotate, show, export, "
        "erasures cancel, ...) name the operator in the entries the library records"
    ),
    ("_keys", "write_key_file"): (
        "keys generate --out: the keys layer writes the key file (0600, never overwritten)"
    ),
    ("_governance", "signing_key_from_settings"): (
        "keys signing-public and audit checkpoint read the signing key from settings without a "
        "Governance, as the audit commands read the audit key"
    ),
    ("_audit", "latest_checkpoint"): (
        "audit checkpoint --latest exports the newest checkpoint in the log, reading only"
    ),
    ("_audit", "read_checkpoint"): "audit verify --checkpoint FILE reads a kept checkpoint",
    ("_audit", "write_checkpoint"): (
        "audit checkpoint appends to the log without building a Governance (policy.load)"
    ),
    ("_audit", "write_checkpoint_file"): (
        "audit checkpoint --out: the audit layer writes the file (0600, never overwritten)"
    ),
    ("_governance", "open_keyring"): (
        "the keys commands open the keyring from settings without a Governance: keys status "
        "works with no master key configured, keys rotate adds the old key as unwrap-only"
    ),
    ("_wiring", "shared_governance"): (
        "every command runs under the process's one Governance per workspace and policy, the "
        "gate a Conversation built without governance= gets under the same settings"
    ),
    ("_policy", "OVERRIDABLE_SECTIONS"): (
        "policy --set validates SECTION.KEY against the sections a policy lets callers override"
    ),
    ("_policy", "shipped_policies"): "policy list shows the policies shipped in the package",
    ("_subjects", "subject_context"): (
        "erasures list reads scheduled erasures and tombstones; no public function lists "
        "scheduled ones"
    ),
    ("_subjects", "SubjectContext"): (
        "a type only: the requests commands pass one subject context, its audit sink naming "
        "the actor, to the public request functions and the register"
    ),
    ("_records", "KINDS"): (
        "requests open --kind offers the register's request kinds as a click.Choice"
    ),
    ("_records", "OUTCOMES"): (
        "requests close --outcome offers the register's closing outcomes as a click.Choice"
    ),
    ("_subjects", "PendingErasure"): (
        "erasures run-due tells an erasure left pending (a damaged file, a missing key, a "
        "link in one agent) from a receipt and a hold, and lists what is left and why"
    ),
    ("_subjects", "pending_erasure"): (
        "erasures show prints what a pending erasure has left, per agent and file, with the "
        "fix; no public function reads a pending erasure's progress"
    ),
    ("_stores", "StoreFactory"): (
        "a type alias only: annotates the lazy store factory the CLI passes to the public "
        "list_agents and agent_records"
    ),
    ("_stores", "isolate_subjects"): (
        "isolate-subjects runs the store layer's migration of an agent's shared memory to "
        "subject memories over every agent; no public function does it for a workspace"
    ),
    ("_memory", "SUMMARY_PREFIX"): (
        "the demo compacts with the text ContextCompressor writes (its prefix and an "
        "extractive summary), through the _demo_summary seam the demo tests patch"
    ),
}


# Public sub-packages (not ``_``-prefixed) the CLI may import from, through their ``__all__``:
# ``governed-memory console`` serves governed_memory.console, imported inside the command.
PUBLIC_PACKAGES = ("console",)


def _public_pairs() -> set[tuple[str, str]]:
    """(sub-package, name there) of every public name (``rotate_keys`` is ``_keys.rotate``)."""
    pairs: set[tuple[str, str]] = set()
    for public in governed_memory.__all__:
        module, _, attribute = governed_memory._EXPORTS[public].partition(":")
        pairs.add((module, attribute or public))
    for package in PUBLIC_PACKAGES:
        names = importlib.import_module(f"governed_memory.{package}").__all__
        pairs.update((package, name) for name in names)
    return pairs


def _imports(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module below governed_memory, name or None for a module import) of ``path``.

    Imports from the CLI's own package are left out.
    """
    found: list[tuple[int, str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            if node.level == 0:
                parts = (node.module or "").split(".")
                if parts[0] != "governed_memory":
                    continue
                module = ".".join(parts[1:])
            elif node.level == 1:
                continue  # governed_memory._cli itself
            else:
                assert node.level == 2, f"{path.name}:{node.lineno} imports above the package"
                module = node.module or ""
            found.extend((node.lineno, module, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                parts = alias.name.split(".")
                if parts[0] == "governed_memory":
                    found.append((node.lineno, ".".join(parts[1:]), None))
    return [item for item in found if not item[1].startswith("_cli")]


def _all_imports() -> list[tuple[str, int, str, str | None]]:
    return [
        (path.name, line, module, name)
        for path in CLI_MODULES
        for line, module, name in _imports(path)
    ]


def test_the_cli_modules_are_found() -> None:
    assert {p.name for p in CLI_MODULES} >= {"__init__.py", "_audit.py", "_keys.py", "_memory.py"}
    assert len(_all_imports()) > 40


def test_every_internal_name_has_a_reason() -> None:
    assert all(reason.strip() for reason in INTERNAL.values())


@pytest.mark.parametrize("path", CLI_MODULES, ids=lambda p: p.name)
def test_cli_imports_no_private_name_or_module(path: Path) -> None:
    bad = [
        f"{path.name}:{line}: {module}" + (f".{name}" if name else "")
        for line, module, name in _imports(path)
        if (name or "").startswith("_")
        or name is None
        or "." in module  # a sub-package's module, not its interface
        or (module and not module.startswith("_") and module not in PUBLIC_PACKAGES)
    ]
    assert bad == []


@pytest.mark.parametrize("path", CLI_MODULES, ids=lambda p: p.name)
def test_cli_imports_only_public_or_listed_internal_names(path: Path) -> None:
    public = _public_pairs()
    bad = [
        f"{path.name}:{line}: {module}.{name}"
        for line, module, name in _imports(path)
        if name is not None and (module, name) not in public and (module, name) not in INTERNAL
    ]
    assert bad == [], "make it public, or add it to INTERNAL with the reason the CLI needs it"


def test_every_listed_internal_name_is_used_and_not_public() -> None:
    """The list stays honest: no stale entry, and nothing listed that is public anyway."""
    used = {(module, name) for _, _, module, name in _all_imports() if name is not None}
    assert sorted(set(INTERNAL) - used) == []
    assert sorted(set(INTERNAL) & _public_pairs()) == []


def test_every_listed_internal_name_exists_in_its_sub_package_interface() -> None:
    for module, name in INTERNAL:
        package = importlib.import_module(f"governed_memory.{module}")
        assert hasattr(package, name), f"governed_memory.{module} does not export {name}"


@pytest.mark.parametrize("package", ["_audit", "_keys"])
def test_audit_and_keys_interfaces_say_which_names_are_for_the_cli(package: str) -> None:
    doc = importlib.import_module(f"governed_memory.{package}").__doc__ or ""
    assert "for the cli" in doc.lower()
    missing = [name for module, name in INTERNAL if module == package and name not in doc]
    assert missing == []
