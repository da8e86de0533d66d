"""Evidence commands: the signing key, ``verify receipt`` and ``audit checkpoint`` (docs/evidence.md).

``keys signing-keygen`` and ``keys signing-public`` join the ``keys`` group;
``verify receipt`` needs the public key only, never a secret nor the workspace.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import click

from .._crypto import LocalSigningKey, PublicKey, SigningKeyProvider
from .._errors import AuditVerificationError, ConfigurationError
from .._records import verify_receipt
from ._context import CliContext
from ._render import emit_json, json_option

__all__ = ["commands", "keys_commands", "public_key_option", "public_keys", "signing_key"]

EXPORT_MANIFEST = "governed-memory-export-manifest"


def public_keys(values: tuple[str, ...]) -> list[PublicKey]:
    """The keys ``--public-key`` names: each a file holding one, or the key's text itself."""
    keys = []
    for value in values:
        path = Path(value)
        if path.is_file():
            try:
                text = path.read_text(encoding="ascii")
            except (OSError, UnicodeDecodeError) as exc:
                raise ConfigurationError(f"public key file {path} cannot be read: {exc}") from exc
            keys.append(PublicKey.parse(text, source=f"public key file {path}"))
        else:
            keys.append(PublicKey.parse(value, source=f"--public-key {value[:60]!r}"))
    return keys


public_key_option = click.option(
    "--public-key",
    "public_key_values",
    multiple=True,
    metavar="PUB",
    help="The deployment's public key (base64, as `keys signing-public` prints it, PEM, or a "
    "file holding either); repeat it to accept older keys after a rotation.",
)


def signing_key(cli: CliContext) -> SigningKeyProvider:
    """The configured signing key (for commands that sign or show it)."""
    from .._governance import signing_key_from_settings

    key = signing_key_from_settings(cli.settings())
    if key is None:
        raise ConfigurationError(
            "no signing key is configured; set GOVERNED_MEMORY_SIGNING_KEY_FILE (create the "
            "file with `governed-memory keys signing-keygen --out FILE`) or "
            "GOVERNED_MEMORY_SIGNING_KEY"
        )
    return key


@click.command("signing-keygen")
@click.option(
    "--out",
    type=click.Path(path_type=Path, dir_okay=False),
    required=True,
    help="The new key file (mode 0600, in an existing folder; never overwritten).",
)
@json_option
def signing_keygen(out: Path, as_json: bool) -> None:
    """Create the deployment's Ed25519 signing key in a new 0600 file; print its public key.

    Point GOVERNED_MEMORY_SIGNING_KEY_FILE at the file (keep it outside the
    workspace, like the master key) and hand the printed public key to your
    auditors: it is all they need to verify receipts and audit checkpoints.
    """
    from .._keys import write_key_file

    key = LocalSigningKey.generate()
    write_key_file(out, key.to_base64())
    public = key.public_key
    if as_json:
        emit_json({"file": str(out), "key_id": key.key_id, "public_key": public.base64()})
        return
    click.echo(public.base64())
    click.echo(f"wrote signing key {key.key_id} to {out} (mode 0600)", err=True)


@click.command("signing-public")
@click.option("--pem", is_flag=True, help="Print a PEM SubjectPublicKeyInfo block (for openssl).")
@json_option
@click.pass_obj
def signing_public(cli: CliContext, pem: bool, as_json: bool) -> None:
    """Print the public key of the configured signing key (base64 of 32 bytes, or --pem)."""
    key = signing_key(cli)
    public = PublicKey(key.public_key_bytes)
    if as_json:
        emit_json({"key_id": key.key_id, "public_key": public.base64(), "pem": public.pem()})
        return
    click.echo(public.pem().rstrip("\n") if pem else public.base64())
    click.echo(f"key id: {key.key_id}", err=True)


@click.group("verify")
def verify_group() -> None:
    """Verify signed evidence with the deployment's public key alone (docs/evidence.md)."""


@verify_group.command("receipt")
@click.argument("file", type=click.Path(path_type=Path, dir_okay=False, exists=True))
@public_key_option
@json_option
def verify_receipt_command(file: Path, public_key_values: tuple[str, ...], as_json: bool) -> None:
    """Check a receipt's signature (erasure, rectification, or an export's manifest.json).

    Exit 0 only when it is signed by one of the given keys and unchanged. An
    export's manifest is also checked against the files beside it.
    """
    if not public_key_values:
        raise click.UsageError("give the deployment's public key: --public-key PUB")
    keys = public_keys(public_key_values)
    document = _document(file)
    check = verify_receipt(document, keys)
    files = _manifest_files(file, document) if check.ok else []
    bad = [f for f in files if f["status"] != "ok"]
    result: dict[str, Any] = {
        "file": str(file),
        "status": check.status,
        "key_id": check.key_id,
        "reason": check.reason,
        "files": files,
    }
    if as_json:
        emit_json(result)
    elif check.ok:
        click.echo(f"OK: {file} is signed by key {check.key_id} and unchanged since")
        for item in files:
            click.echo(f"  {item['path']}: {item['status']}")
    elif check.status == "unsigned":
        click.echo(
            f"UNSIGNED: {file} carries no signature: it was written while no signing key was "
            "configured, so nothing vouches for it"
        )
    else:
        click.echo(f"FAILED: {file}: {check.reason}")
    if not check.ok or bad:
        why = check.reason if not check.ok else f"{bad[0]['path']}: {bad[0]['status']}"
        raise AuditVerificationError(f"receipt {file} does not verify ({check.status}): {why}")


def _document(file: Path) -> dict[str, Any]:
    try:
        data = json.loads(file.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ConfigurationError(f"{file} is not a JSON receipt ({exc})") from exc
    if not isinstance(data, dict):
        raise ConfigurationError(f"{file} is not a JSON object, so not a receipt")
    return data


def _manifest_files(file: Path, document: dict[str, Any]) -> list[dict[str, Any]]:
    """For an export's manifest: whether each file it lists is beside it with its SHA-256."""
    if document.get("format") != EXPORT_MANIFEST:
        return []
    found = []
    for item in document.get("files") or []:
        name = str(item.get("path", "")) if isinstance(item, dict) else ""
        path = file.parent / name
        if not name or "/" in name or not path.is_file():
            status = "missing"
        else:
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            status = "ok" if digest == item.get("sha256") else "changed (SHA-256 differs)"
        found.append({"path": name, "status": status})
    return found


keys_commands: list[click.Command] = [signing_keygen, signing_public]
"""Commands of the ``keys`` group defined here."""

commands: list[click.Command] = [verify_group]
