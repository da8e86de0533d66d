"""Which storage a deployment runs on: ``GOVERNED_MEMORY_DATABASE_URL`` and the policy's ``[storage]``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from governed_memory import ConfigurationError, Conversation, PolicyError, Settings, load_policy
from governed_memory._cli import main
from governed_memory._governance import FileStorage, storage_backend
from governed_memory._governance import _storage as storage_module
from governed_memory._policy._model import Policy

URL = "postgresql://gm:pa55word-do-not-print@db.example:5432/gm"
POSTGRES = Policy.model_validate({"storage": {"backend": "postgres"}})
FILES = Policy.model_validate({"storage": {"backend": "files"}})


def test_the_database_url_is_read_from_its_variable_and_kept_secret(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("GOVERNED_MEMORY_DATABASE_URL", URL)
    settings = Settings()
    assert settings.database_url is not None
    assert settings.database_url.get_secret_value() == URL
    assert "pa55word" not in repr(settings) and "pa55word" not in str(settings)


@pytest.mark.parametrize(
    ("policy", "url", "backend"),
    [
        (Policy(), None, "files"),  # the default: the workspace's files
        (Policy(), URL, "postgres"),  # a URL and no [storage] table
        (POSTGRES, None, "postgres"),  # libpq's PG* variables name the server
        (POSTGRES, URL, "postgres"),
        (FILES, None, "files"),
    ],
)
def test_the_backend_follows_the_storage_table_then_the_url(
    policy: Policy, url: str | None, backend: str
) -> None:
    assert storage_backend(Settings(database_url=url), policy) == backend


def test_files_with_a_url_is_refused_naming_both_and_the_fix() -> None:
    with pytest.raises(ConfigurationError) as caught:
        storage_backend(Settings(database_url=URL), FILES)
    message = str(caught.value)
    assert "backend = 'files'" in message and "GOVERNED_MEMORY_DATABASE_URL" in message
    assert "unset" in message and "pa55word" not in message


def test_an_unknown_backend_is_refused_by_the_policy(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text('[storage]\nbackend = "sqlite"\n')
    with pytest.raises(PolicyError, match=r"storage\.backend"):
        load_policy(path)


def test_the_storage_table_is_not_overridable_per_process() -> None:
    with pytest.raises(ConfigurationError, match="storage"):
        Settings(storage={"backend": "files"})  # type: ignore[call-arg]


def test_the_file_backend_is_opened_on_the_workspace_with_its_keyring_setting(
    tmp_path: Path,
) -> None:
    settings = Settings(keyring_dir=tmp_path / "keys")
    storage = storage_module.open_storage(settings, Policy(), tmp_path / "ws")
    assert isinstance(storage, FileStorage)
    assert storage.kind == "files" and storage.files == tmp_path / "ws"
    assert storage.key_storage() == tmp_path / "keys"
    assert storage.records() == tmp_path / "ws" / ".governed_memory"
    assert not (tmp_path / "ws").exists()  # opening writes nothing


class _DatabaseLike(FileStorage):
    """A storage that keeps no workspace files, as the PostgreSQL backend."""

    kind = "postgres"

    @property
    def files(self) -> None:  # type: ignore[override]
        return None

    @property
    def where(self) -> str:
        return "db.example:5432/gm"


def test_with_a_database_a_plain_conversation_is_governed_and_none_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOVERNED_MEMORY_DATABASE_URL", URL)
    monkeypatch.setenv("WORKSPACE_DIR", str(tmp_path / "ws"))
    chosen: list[str] = []

    def database(settings: Settings, policy: Policy, workspace: Path) -> Any:
        chosen.append(storage_backend(settings, policy))
        return _DatabaseLike(tmp_path / "db")

    monkeypatch.setattr(storage_module, "open_storage", database)
    conversation = Conversation(name="c")  # the default policy, a database configured
    assert conversation.governance is not None
    assert conversation.governance.storage.kind == "postgres" and chosen == ["postgres"]
    with pytest.raises(ConfigurationError) as caught:
        Conversation(name="c", governance=None)
    message = str(caught.value)
    assert "postgres (db.example:5432/gm)" in message and "governance=" in message
    assert "pa55word" not in message


def _show(tmp_path: Path, env: dict[str, str], *args: str) -> dict[str, Any]:
    result = CliRunner().invoke(
        main, ["--workspace", str(tmp_path), *args, "policy", "show", "--json"], env=env
    )
    assert result.exit_code == 0, result.stderr
    return {row["key"]: row for row in json.loads(result.stdout)["settings"]}


def test_policy_show_lists_the_backend_and_the_url_only_as_set(tmp_path: Path) -> None:
    rows = _show(tmp_path, {"GOVERNED_MEMORY_DATABASE_URL": URL})
    assert rows["storage"]["value"] == "postgres"
    assert rows["storage"]["source"] == "database_url is set"
    assert rows["database_url"]["value"] == "********** (set)"
    unset = _show(tmp_path, {})
    assert unset["storage"]["value"] == "files" and unset["storage"]["source"] == "built-in default"
    assert unset["database_url"]["value"] == "(not set)"
    result = CliRunner().invoke(
        main,
        ["--workspace", str(tmp_path), "policy", "show"],
        env={"GOVERNED_MEMORY_DATABASE_URL": URL},
    )
    assert "pa55word" not in result.stdout + result.stderr


def test_policy_show_refuses_files_with_a_url(tmp_path: Path) -> None:
    policy = tmp_path / "files.toml"
    policy.write_text('[storage]\nbackend = "files"\n')
    result = CliRunner().invoke(
        main,
        ["--workspace", str(tmp_path), "--policy", str(policy), "policy", "show"],
        env={"GOVERNED_MEMORY_DATABASE_URL": URL},
    )
    assert result.exit_code == 1 and "backend = 'files'" in result.stderr


def test_policy_check_names_the_storage_backend(tmp_path: Path) -> None:
    policy = tmp_path / "pg.toml"
    policy.write_text('[storage]\nbackend = "postgres"\n')
    result = CliRunner().invoke(main, ["policy", "check", str(policy), "--json"])
    assert result.exit_code == 0 and json.loads(result.stdout)["storage"] == "postgres"
    result = CliRunner().invoke(main, ["policy", "check", "regulated"])
    assert "storage: not set" in result.stdout
