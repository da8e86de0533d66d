"""``governed-memory policy check|show|list`` through the real entry point."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from governed_memory._cli import main


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize("name", ["default", "regulated", "hipaa"])
def test_check_accepts_each_shipped_policy(name: str) -> None:
    code, out, _ = run("policy", "check", name)
    assert code == 0 and f"id {name}, version 1" in out


def test_check_refuses_an_invalid_file_with_exit_1(tmp_path: Path) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text("[audit]\nenabled = 1\n")
    code, out, err = run("policy", "check", str(bad))
    assert code == 1 and out == ""
    assert str(bad) in err and "audit.enabled" in err and "true or false" in err


def test_check_refuses_a_missing_file_with_exit_1(tmp_path: Path) -> None:
    code, _, err = run("policy", "check", str(tmp_path / "missing.toml"))
    assert code == 1 and "does not exist" in err


def test_check_json(tmp_path: Path) -> None:
    code, out, _ = run("policy", "check", "hipaa", "--json")
    assert code == 0 and json.loads(out)["id"] == "hipaa"


def test_check_without_a_file_is_a_usage_error() -> None:
    code, _, _ = run("policy", "check")
    assert code == 2


def test_show_names_the_source_of_every_value(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOVERNED_MEMORY_RETENTION__EXPORTS_MAX_AGE", "14d")
    code, out, _ = run(
        "--workspace",
        str(tmp_path),
        "--policy",
        "regulated",
        "policy",
        "show",
        "--set",
        "retention.archives_max_age=60d",
        "--json",
    )
    assert code == 0
    data = json.loads(out)
    values = {row["key"]: (row["value"], row["source"]) for row in data["values"]}
    assert values["retention.archives_max_age"] == ("60d", "argument")
    assert values["retention.exports_max_age"] == ("14d", "environment")
    assert values["encryption.enabled"] == (True, "policy file")
    assert values["retention.archives_max_count"] == (None, "built-in default")
    assert data["policy"] == {"id": "regulated", "version": "1"}
    assert data["source"].endswith("regulated.toml")
    settings = {row["key"]: row["source"] for row in data["settings"]}
    assert settings["policy"] == "argument" and settings["workspace_dir"] == "argument"


def test_show_table_for_people(tmp_path: Path) -> None:
    code, out, _ = run("--workspace", str(tmp_path), "--policy", "hipaa", "policy", "show")
    assert code == 0
    assert "policy hipaa v1" in out and "retention.audit_min_age" in out and "6y" in out


def test_show_with_environment_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOVERNED_MEMORY_POLICY", "hipaa")
    code, out, _ = run("--workspace", str(tmp_path), "policy", "show", "--json")
    data = json.loads(out)
    assert code == 0 and data["policy"]["id"] == "hipaa"
    assert {r["key"]: r["source"] for r in data["settings"]}["policy"] == "environment"


@pytest.mark.parametrize("assignment", ["archives_max_age=1d", "nosuch.key=1", "retention.x"])
def test_show_refuses_a_malformed_set_with_exit_2(tmp_path: Path, assignment: str) -> None:
    code, _, err = run("--workspace", str(tmp_path), "policy", "show", "--set", assignment)
    assert code == 2 and "--set" in err


def test_show_refuses_an_override_breaking_the_policy_with_exit_1(tmp_path: Path) -> None:
    code, _, err = run(
        "--workspace",
        str(tmp_path),
        "--policy",
        "hipaa",
        "policy",
        "show",
        "--set",
        "audit.enabled=false",
    )
    assert code == 1 and "retention.audit_min_age" in err


def test_list_shows_every_shipped_policy() -> None:
    code, out, _ = run("policy", "list", "--json")
    assert code == 0
    assert [row["name"] for row in json.loads(out)] == ["default", "hipaa", "regulated"]


def test_every_policy_command_has_help() -> None:
    for args in (["policy"], ["policy", "check"], ["policy", "show"], ["policy", "list"]):
        code, out, _ = run(*args, "--help")
        assert code == 0 and "Usage" in out
