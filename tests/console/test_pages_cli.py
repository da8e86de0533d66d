"""``governed-memory console`` and its account commands, through the real CLI entry point."""

from __future__ import annotations

import json
import stat
from pathlib import Path

from click.testing import CliRunner

from governed_memory._cli import main

PASSWORD = "a long enough passphrase"


def test_add_user_writes_a_private_hash_and_set_role_and_remove_user_change_it(
    tmp_path: Path,
) -> None:
    accounts = tmp_path / "accounts.json"
    runner = CliRunner()
    added = runner.invoke(
        main,
        [
            "console",
            "add-user",
            "olivia",
            "--role",
            "privacy-officer",
            "--password-stdin",
            "--accounts",
            str(accounts),
        ],
        input=PASSWORD + "\n",
    )
    assert added.exit_code == 0, added.output
    assert "added olivia (privacy-officer)" in added.output
    assert stat.S_IMODE(accounts.stat().st_mode) == 0o600
    assert PASSWORD not in accounts.read_text()
    changed = runner.invoke(
        main, ["console", "set-role", "olivia", "--role", "auditor", "--accounts", str(accounts)]
    )
    assert changed.exit_code == 0 and "olivia is now auditor" in changed.output
    assert "auditor" in accounts.read_text()
    removed = runner.invoke(main, ["console", "remove-user", "olivia", "--accounts", str(accounts)])
    assert removed.exit_code == 0, removed.output
    assert "olivia" not in json.dumps(json.loads(accounts.read_text()))


def test_add_user_finds_the_accounts_file_in_the_config(tmp_path: Path) -> None:
    accounts = tmp_path / "accounts.json"
    config = tmp_path / "console.toml"
    config.write_text(f"accounts_file = {json.dumps(str(accounts))}\n")
    done = CliRunner().invoke(
        main,
        [
            "console",
            "add-user",
            "adam",
            "--role",
            "administrator",
            "--password-stdin",
            "--config",
            str(config),
        ],
        input=PASSWORD + "\n",
    )
    assert done.exit_code == 0, done.output
    assert accounts.exists()


def test_a_short_password_is_refused_in_one_line(tmp_path: Path) -> None:
    done = CliRunner().invoke(
        main,
        [
            "console",
            "add-user",
            "x",
            "--role",
            "auditor",
            "--password-stdin",
            "--accounts",
            str(tmp_path / "a.json"),
        ],
        input="short\n",
    )
    assert done.exit_code == 1
    assert done.output.startswith("error: ") and "Traceback" not in done.output
    assert done.output.count("\n") == 1


def test_serving_without_a_sign_in_method_is_refused_before_serving(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    done = CliRunner().invoke(main, ["--workspace", str(workspace), "console", "--port", "0"])
    assert done.exit_code == 1
    assert "no way to sign in is configured" in done.output and "accounts_file" in done.output


def test_a_public_bind_without_tls_is_refused(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    accounts = tmp_path / "accounts.json"
    config = tmp_path / "console.toml"
    config.write_text(f"accounts_file = {json.dumps(str(accounts))}\n")
    done = CliRunner().invoke(
        main,
        ["--workspace", str(workspace), "console", "--host", "0.0.0.0", "--config", str(config)],
    )
    assert done.exit_code == 1 and "no TLS is configured" in done.output


def test_a_deployment_without_an_audit_log_is_refused(tmp_path: Path) -> None:
    workspace = tmp_path / "ws"
    workspace.mkdir()
    accounts = tmp_path / "accounts.json"
    config = tmp_path / "console.toml"
    config.write_text(f"accounts_file = {json.dumps(str(accounts))}\n")
    done = CliRunner().invoke(
        main, ["--workspace", str(workspace), "console", "--config", str(config)]
    )
    assert done.exit_code == 1
    assert "records every view of personal data" in done.output
    assert "audit.enabled = true" in done.output
