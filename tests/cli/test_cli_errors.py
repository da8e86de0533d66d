"""Hostile input named in issue 13 (finding 9) ends in one line naming the value and the fix.

Each case once went out as a traceback. The exit status is 1 (or 2 for a
usage error), stderr holds no traceback, and nothing was written.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from governed_memory import Conversation, Governance, memory_md_path
from governed_memory._cli import main
from governed_memory._crypto import LocalKeyProvider, generate_master_key
from governed_memory._policy._model import Policy

ENCRYPTED = Policy.model_validate({"encryption": {"enabled": True}})


def _run(
    *args: str, env: dict[str, str] | None = None, stdin: str | None = None
) -> tuple[int, str]:
    result = CliRunner().invoke(main, list(args), env=env, input=stdin)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    output = result.stdout + result.stderr
    assert "Traceback" not in output
    return result.exit_code, output


def _encrypted(workspace: Path) -> dict[str, str]:
    key = generate_master_key()
    gov = Governance(
        workspace=workspace, policy=ENCRYPTED, key_provider=LocalKeyProvider.from_base64(key)
    )
    conv = Conversation(name="c", memory_md_path=memory_md_path("A", workspace), governance=gov)
    conv.add("User", "hello", subject_id="subject-1")
    conv.memory_md_path = None
    return {
        "GOVERNED_MEMORY_MASTER_KEY": key,
        "GOVERNED_MEMORY_ENCRYPTION__ENABLED": "true",
    }


@pytest.mark.parametrize("content", ["{", "[]", '"x"', "null"])
def test_a_damaged_keyring_file_under_keys_status_names_the_file(
    workspace: Path, content: str
) -> None:
    env = _encrypted(workspace)
    meta = workspace / ".governed_memory" / "keyring" / "keyring.json"
    meta.write_text(content, encoding="utf-8")
    code, out = _run("--workspace", str(workspace), "keys", "status", env=env)
    assert code == 1
    assert f"the keyring file {meta} is damaged" in out and "restore the keyring" in out


@pytest.mark.parametrize(
    "args",
    [
        ("erase", "--subject", "s", "--grace", "9999999999999y"),
        ("audit", "export", "--since", "99999999d"),
    ],
    ids=["erase-grace", "audit-export-since"],
)
def test_a_huge_duration_names_the_maximum(workspace: Path, args: tuple[str, ...]) -> None:
    code, out = _run("--workspace", str(workspace), *args)
    assert code in (1, 2)
    assert "longer than the maximum of 1000y" in out and "'forever'" in out


def test_a_huge_tail_count_names_the_range(workspace: Path) -> None:
    code, out = _run("--workspace", str(workspace), "audit", "tail", "-n", "9" * 30)
    assert code == 2 and "1<=x<=1000000" in out


@pytest.mark.parametrize("subject", ["a\udcff", "\ud800"], ids=["non-utf8-byte", "surrogate"])
def test_a_lone_surrogate_in_a_subject_id_is_refused_before_anything_is_written(
    workspace: Path, subject: str
) -> None:
    before = sorted(workspace.rglob("*"))
    code, out = _run(
        "--workspace",
        str(workspace),
        "consent",
        "grant",
        "--subject",
        subject,
        "--purpose",
        "persist",
    )
    assert code == 2
    assert "is not valid UTF-8 text" in out and "LANG" in out
    assert sorted(workspace.rglob("*")) == before


def test_a_keyring_dir_that_is_a_file_is_a_configuration_error(workspace: Path) -> None:
    code, out = _run(
        "--workspace",
        str(workspace),
        "--policy",
        "regulated",
        "consent",
        "grant",
        "--subject",
        "s",
        "--purpose",
        "persist",
        env={
            "GOVERNED_MEMORY_KEYRING_DIR": os.devnull,
            "GOVERNED_MEMORY_MASTER_KEY": generate_master_key(),
        },
    )
    assert code == 1
    assert f"GOVERNED_MEMORY_KEYRING_DIR={os.devnull} is not a folder" in out


def test_erase_on_a_full_disk_names_the_file_and_how_to_finish(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = _encrypted(workspace)
    keyring = workspace / ".governed_memory" / "keyring"
    real_fsync = os.fsync

    def full_disk(fd: int) -> None:
        # The keyring's writes fail as on a full disk; everything else is unchanged.
        if str(keyring) in os.readlink(f"/proc/self/fd/{fd}"):
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", full_disk)
    code, out = _run(
        "--workspace", str(workspace), "erase", "--subject", "subject-1", "--yes", env=env
    )
    assert code == 1
    assert "No space left on device" in out and "free space on that disk" in out
    assert "erasures resume" in out


def test_an_unexpected_error_is_one_line_with_its_place(
    workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import governed_memory._cli._memory as memory_cli

    def broken(*args: object, **kwargs: object) -> None:
        raise TypeError("'int' object is not iterable")

    monkeypatch.setattr(memory_cli, "agent_records", broken)
    code, out = _run("--workspace", str(workspace), "show", "A")
    assert code == 1
    assert out.startswith("error: unexpected TypeError: 'int' object is not iterable (at ")
    assert "restore it from a backup" in out


@pytest.mark.parametrize("as_of", ["0001-01-01", "9999-12-31T23:59:59-12:00"])
def test_an_as_of_outside_the_plannable_years_names_the_range(workspace: Path, as_of: str) -> None:
    code, out = _run("--workspace", str(workspace), "purge", "--dry-run", "--as-of", as_of)
    assert code == 2
    assert "is outside the years 1970 to 8000" in out


def test_a_wrong_typed_erasure_record_is_one_line_not_a_traceback(workspace: Path) -> None:
    # The record readers (_records) check field types: one line naming the file,
    # the field, what was found and expected, and the fix.
    assert _run("--workspace", str(workspace), "erase", "--subject", "s1", "--yes")[0] == 0
    (record,) = (workspace / ".governed_memory" / "tombstones").glob("*.json")
    document = json.loads(record.read_text(encoding="utf-8"))
    document["receipt"]["files"] = 5
    record.write_text(json.dumps(document), encoding="utf-8")
    code, out = _run("--workspace", str(workspace), "erasures", "list")
    assert code == 1
    assert out.startswith(f"error: erasure record {record}, receipt: field 'files' is 5 (int)")
    assert "restore it from a backup" in out
