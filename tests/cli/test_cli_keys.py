"""The encryption commands through the real entry point: keys, encrypt-workspace, decrypt-workspace."""

from __future__ import annotations

import base64
import errno
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from governed_memory import Conversation, Governance, memory_md_path
from governed_memory._cli import main
from governed_memory._crypto import LocalKeyProvider, generate_master_key
from governed_memory._policy._model import Policy

ENCRYPTED = Policy.model_validate({"encryption": {"enabled": True}})


def _run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    result = CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)
    return result.exit_code, result.stdout, result.stderr


def _populate(workspace: Path, key: str) -> None:
    gov = Governance(
        workspace=workspace, policy=ENCRYPTED, key_provider=LocalKeyProvider.from_base64(key)
    )
    conv = Conversation(name="c", memory_md_path=memory_md_path("A", workspace), governance=gov)
    conv.add("User", "hello", subject_id="subject-1")
    conv.compact("summary")


def test_generate_prints_a_usable_key_and_its_id() -> None:
    code, out, err = _run("keys", "generate")
    assert code == 0
    key = out.strip()
    assert len(base64.b64decode(key)) == 32
    assert LocalKeyProvider.from_base64(key).key_id in err


def test_generate_writes_a_private_file_and_never_overwrites(tmp_path: Path) -> None:
    path = tmp_path / "master.key"
    code, out, _ = _run("keys", "generate", "--out", str(path), "--json")
    assert code == 0
    doc = json.loads(out)
    assert "key" not in doc and doc["file"] == str(path)
    assert os.stat(path).st_mode & 0o777 == 0o600
    assert LocalKeyProvider.from_file(path).key_id == doc["key_id"]
    code, _, err = _run("keys", "generate", "--out", str(path))
    assert code == 1 and "never overwritten" in err


def _one_line_error(code: int, out: str, err: str) -> str:
    """The CLI's failure: exit 1, one line on stderr, no traceback, no key on stdout."""
    assert code == 1
    assert out == ""
    assert err.startswith("error: ") and err.count("\n") == 1
    assert "Traceback" not in err
    return err


def test_generate_into_a_missing_folder_names_it_and_the_fix(tmp_path: Path) -> None:
    folder = tmp_path / "secrets"
    err = _one_line_error(*_run("keys", "generate", "--out", str(folder / "master.key")))
    assert f"the folder {folder} does not exist" in err
    assert f"mkdir -m 700 {folder}" in err
    assert not folder.exists()


def test_generate_into_an_unwritable_folder_names_it_and_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "master.key"
    real = os.open

    def denied(target: Any, flags: int, mode: int = 0o777, **kwargs: Any) -> int:
        # File modes do not stop root, so the denial is simulated.
        if Path(target) == path:
            raise PermissionError(errno.EACCES, "Permission denied")
        return real(target, flags, mode, **kwargs)

    monkeypatch.setattr(os, "open", denied)
    err = _one_line_error(*_run("keys", "generate", "--out", str(path)))
    assert f"permission denied in the folder {tmp_path}" in err
    assert "choose a folder you can write to" in err
    assert list(tmp_path.iterdir()) == []


def test_generate_over_an_existing_file_names_it_and_keeps_it(tmp_path: Path) -> None:
    path = tmp_path / "master.key"
    path.write_text("the old key\n")
    err = _one_line_error(*_run("keys", "generate", "--out", str(path), "--json"))
    assert f"{path} already exists" in err and "Choose another path" in err
    assert path.read_text() == "the old key\n"


def test_generate_on_a_full_disk_names_the_file_and_leaves_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def disk_full(fd: int) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    path = tmp_path / "master.key"
    monkeypatch.setattr(os, "fsync", disk_full)
    err = _one_line_error(*_run("keys", "generate", "--out", str(path)))
    assert f"could not write the key file {path}" in err and "free some space" in err
    assert list(tmp_path.iterdir()) == []


def test_generate_onto_a_folder_is_a_usage_error(tmp_path: Path) -> None:
    code, out, err = _run("keys", "generate", "--out", str(tmp_path))
    assert code == 2 and out == "" and str(tmp_path) in err and "Traceback" not in err


def test_status_shows_key_ids_never_key_material(workspace: Path) -> None:
    key = generate_master_key()
    _populate(workspace, key)
    code, out, _ = _run(
        "--workspace",
        str(workspace),
        "keys",
        "status",
        "--json",
        env={"GOVERNED_MEMORY_MASTER_KEY": key},
    )
    assert code == 0
    doc = json.loads(out)
    key_id = LocalKeyProvider.from_base64(key).key_id
    assert doc["master_key_id"] == key_id
    assert doc["by_master_key"] == {key_id: 3}
    assert sorted(k["kind"] for k in doc["keys"]) == ["agent", "subject"]
    assert "subject-1" not in out
    assert key not in out
    for entry in (workspace / ".governed_memory" / "keyring" / "keys").iterdir():
        for wrapped in json.loads(entry.read_text())["keys"].values():
            assert wrapped["wrapped"] not in out
    code, table, _ = _run(
        "--workspace", str(workspace), "keys", "status", env={"GOVERNED_MEMORY_MASTER_KEY": key}
    )
    assert code == 0 and "inside the workspace" in table and key_id in table


def test_status_works_without_a_master_key(workspace: Path) -> None:
    _populate(workspace, generate_master_key())
    code, out, _ = _run("--workspace", str(workspace), "keys", "status", "--json")
    assert code == 0
    assert json.loads(out)["master_key_id"] is None


def test_rotate_with_the_old_key_in_the_environment(workspace: Path) -> None:
    old, new = generate_master_key(), generate_master_key()
    _populate(workspace, old)
    env = {"GOVERNED_MEMORY_MASTER_KEY": new, "GOVERNED_MEMORY_MASTER_KEY_OLD": old}
    code, out, _ = _run("--workspace", str(workspace), "keys", "rotate", "--json", env=env)
    assert code == 0
    report = json.loads(out)
    assert (
        report["rewrapped"] == 3 and report["to_key_id"] == LocalKeyProvider.from_base64(new).key_id
    )
    code, out, _ = _run(
        "--workspace",
        str(workspace),
        "--policy",
        "regulated",
        "show",
        "A",
        env={"GOVERNED_MEMORY_MASTER_KEY": new},
    )
    assert code == 0 and "summary" in out


def test_rotate_with_an_old_key_file_and_reencrypt(workspace: Path, tmp_path: Path) -> None:
    old, new = generate_master_key(), generate_master_key()
    _populate(workspace, old)
    old_file = tmp_path / "old.key"
    old_file.write_text(old)
    os.chmod(old_file, 0o600)
    env = {"GOVERNED_MEMORY_MASTER_KEY": new}
    code, out, _ = _run(
        "--workspace",
        str(workspace),
        "keys",
        "rotate",
        "--old-key-file",
        str(old_file),
        "--reencrypt",
        env=env,
    )
    assert code == 0, out
    assert "files reencrypted" in out


def test_rotate_without_the_old_key_fails_naming_it(workspace: Path) -> None:
    old = generate_master_key()
    _populate(workspace, old)
    code, _, err = _run(
        "--workspace",
        str(workspace),
        "keys",
        "rotate",
        env={"GOVERNED_MEMORY_MASTER_KEY": generate_master_key()},
    )
    assert code == 1
    assert LocalKeyProvider.from_base64(old).key_id in err
    assert err.startswith("error: ") and len(err.strip().splitlines()) == 1


def test_commands_needing_the_key_fail_with_the_fix(workspace: Path) -> None:
    code, _, err = _run("--workspace", str(workspace), "encrypt-workspace")
    assert code == 1 and "GOVERNED_MEMORY_MASTER_KEY" in err


def test_encrypt_and_decrypt_workspace_round_trip(fixtures_dir: Path, tmp_path: Path) -> None:
    workspace = tmp_path / "ref"
    shutil.copytree(fixtures_dir / "write_compact" / "workspace", workspace)
    original = {p: p.read_bytes() for p in workspace.rglob("*.md")}
    env = {"GOVERNED_MEMORY_MASTER_KEY": generate_master_key()}
    code, out, _ = _run("--workspace", str(workspace), "encrypt-workspace", "--json", env=env)
    assert code == 0 and json.loads(out)["converted"] == 2
    assert not list(workspace.rglob("*.md"))
    code, out, _ = _run("--workspace", str(workspace), "encrypt-workspace", env=env)
    assert code == 0 and "encrypted 0 file(s)" in out
    code, out, _ = _run("--workspace", str(workspace), "decrypt-workspace", env=env)
    assert code == 0 and "decrypted 2 file(s)" in out
    assert {p: p.read_bytes() for p in workspace.rglob("*.md")} == original


@pytest.mark.parametrize("command", [["keys", "rotate", "--nope"], ["encrypt-workspace", "extra"]])
def test_usage_errors_exit_2(command: list[str]) -> None:
    assert _run(*command)[0] == 2
