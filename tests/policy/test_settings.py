"""Settings: the environment names, precedence, and secrets that never show."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from governed_memory import ConfigurationError, Governance, Settings, resolve_policy
from governed_memory._cli import main

SECRET = "c2VjcmV0LW1hc3Rlci1rZXktZG8tbm90LXByaW50"


def test_every_variable_is_read_with_its_documented_name(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    env = {
        "GOVERNED_MEMORY_POLICY": "regulated",
        "WORKSPACE_DIR": str(tmp_path / "ws"),
        "GOVERNED_MEMORY_MASTER_KEY": SECRET,
        "GOVERNED_MEMORY_MASTER_KEY_FILE": str(tmp_path / "key"),
        "GOVERNED_MEMORY_AUDIT_KEY": "audit-" + SECRET,
        "GOVERNED_MEMORY_OTLP_ENDPOINT": "http://127.0.0.1:4318",
        "GOVERNED_MEMORY_OTLP_HEADERS": "authorization=Bearer " + SECRET,
        "GOVERNED_MEMORY_SERVICE_NAME": "bank-agents",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    settings = Settings()
    assert settings.policy == Path("regulated")
    assert settings.workspace_dir == tmp_path / "ws"
    assert settings.master_key is not None and settings.master_key.get_secret_value() == SECRET
    assert settings.master_key_file == tmp_path / "key"
    assert settings.audit_key is not None
    assert settings.otlp_endpoint == "http://127.0.0.1:4318"
    assert settings.otlp_headers is not None
    assert settings.service_name == "bank-agents"
    assert all(settings.source_of(name) == "environment" for name in settings.model_fields_set)


def test_workspace_dir_keeps_the_reference_name_without_prefix(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("WORKSPACE_DIR", str(tmp_path / "a"))
    assert Governance(settings=Settings()).workspace == tmp_path / "a"
    assert Governance(settings=Settings(workspace_dir=tmp_path / "b")).workspace == tmp_path / "b"


def test_defaults_without_environment() -> None:
    settings = Settings()
    assert settings.policy is None and settings.master_key is None
    assert settings.service_name == "governed-memory"
    assert settings.policy_overrides() == {}


def test_argument_beats_environment_beats_file_beats_default(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    key = "retention.archives_max_age"
    # built-in default
    assert resolve_policy(Settings()).sources[key] == "built-in default"
    # policy file (regulated: 30d)
    resolved = resolve_policy(Settings(policy="regulated"))
    assert resolved.policy.retention.archives_max_age == dt.timedelta(days=30)
    assert resolved.sources[key] == "policy file"
    # environment beats the file
    monkeypatch.setenv("GOVERNED_MEMORY_RETENTION__ARCHIVES_MAX_AGE", "60d")
    resolved = resolve_policy(Settings(policy="regulated"))
    assert resolved.policy.retention.archives_max_age == dt.timedelta(days=60)
    assert resolved.sources[key] == "environment"
    # an argument beats the environment
    resolved = resolve_policy(Settings(policy="regulated", retention={"archives_max_age": "90d"}))
    assert resolved.policy.retention.archives_max_age == dt.timedelta(days=90)
    assert resolved.sources[key] == "argument"


def test_argument_beats_environment_for_plain_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOVERNED_MEMORY_SERVICE_NAME", "from-env")
    monkeypatch.setenv("GOVERNED_MEMORY_POLICY", "hipaa")
    settings = Settings(service_name="from-arg")
    assert settings.service_name == "from-arg"
    assert settings.source_of("service_name") == "argument"
    assert settings.source_of("policy") == "environment"


def test_environment_overrides_are_typed_from_their_text(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOVERNED_MEMORY_AUDIT__ENABLED", "true")
    monkeypatch.setenv("GOVERNED_MEMORY_RETENTION__ARCHIVES_MAX_COUNT", "5")
    monkeypatch.setenv("GOVERNED_MEMORY_CONSENT__REQUIRED_FOR", '["persist"]')
    policy = resolve_policy(Settings()).policy
    assert policy.audit.enabled is True
    assert policy.retention.archives_max_count == 5
    assert policy.consent.required_for == ("persist",)


def test_unknown_setting_is_refused() -> None:
    with pytest.raises(ConfigurationError, match=r"docs/settings\.md"):
        Settings(master_kee="x")


def test_secrets_never_appear_in_repr_str_or_dumps(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOVERNED_MEMORY_OTLP_HEADERS", "authorization=" + SECRET)
    settings = Settings(master_key=SECRET, audit_key=SECRET)
    for text in (
        repr(settings),
        str(settings),
        settings.model_dump_json(),
        str(settings.model_dump()),
    ):
        assert SECRET not in text
    assert "**********" in repr(settings)


def test_invalid_secret_value_is_not_echoed_in_the_error() -> None:
    with pytest.raises(ConfigurationError) as info:
        Settings(master_key={"k": SECRET})
    assert SECRET not in str(info.value)
    assert "master_key" in str(info.value)


def test_policy_show_never_prints_secrets(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("GOVERNED_MEMORY_MASTER_KEY", SECRET)
    monkeypatch.setenv("GOVERNED_MEMORY_AUDIT_KEY", SECRET)
    monkeypatch.setenv("GOVERNED_MEMORY_OTLP_HEADERS", "authorization=" + SECRET)
    runner = CliRunner()
    for args in (["policy", "show"], ["policy", "show", "--json"]):
        result = runner.invoke(main, ["--workspace", str(tmp_path), *args])
        assert result.exit_code == 0, result.output
        assert SECRET not in result.output
        assert "********** (set)" in result.output
    data = json.loads(runner.invoke(main, ["policy", "show", "--json"]).output)
    master = next(row for row in data["settings"] if row["key"] == "master_key")
    assert master == {"key": "master_key", "value": "********** (set)", "source": "environment"}


@pytest.mark.parametrize(
    ("variable", "suggestion"),
    [
        ("GOVERNED_MEMORY_POLCY", "GOVERNED_MEMORY_POLICY"),
        ("GOVERNED_MEMORY_MASTER_KEYFILE", "GOVERNED_MEMORY_MASTER_KEY_FILE"),
        ("governed_memory_policy__id", "GOVERNED_MEMORY_POLICY"),
    ],
)
def test_a_misspelt_variable_is_refused_not_ignored(
    monkeypatch: pytest.MonkeyPatch, variable: str, suggestion: str
) -> None:
    monkeypatch.setenv(variable, "x")
    with pytest.raises(ConfigurationError) as info:
        Settings()
    assert variable in str(info.value) and f"did you mean {suggestion}?" in str(info.value)


def test_an_override_of_memory_isolation_is_refused_with_the_fix(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every process must lay out and read the files alike: [memory] lives in the policy file."""
    monkeypatch.setenv("GOVERNED_MEMORY_MEMORY__ISOLATION", "agent")
    with pytest.raises(ConfigurationError) as info:
        Settings()
    message = str(info.value)
    assert "GOVERNED_MEMORY_MEMORY__ISOLATION" in message and "[memory]" in message
    assert "policy file" in message and "did you mean" not in message


def test_a_misspelt_variable_fails_the_cli_with_exit_1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOVERNED_MEMORY_SERVICENAME", "x")
    result = CliRunner().invoke(main, ["policy", "show"])
    assert result.exit_code == 1 and "GOVERNED_MEMORY_SERVICE_NAME" in result.stderr
