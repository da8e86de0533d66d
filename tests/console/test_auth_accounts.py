"""Local accounts: argon2 hashes, the file's mode and owner, atomic changes (_auth/_accounts.py)."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

import pytest
from pages_client import TEST_HASHING

import governed_memory as gm
from governed_memory.console._auth import (
    AccountsFileError,
    add_user,
    remove_user,
    set_password,
    set_role,
)
from governed_memory.console._auth._accounts import Accounts
from governed_memory.console._config import PasswordHashing
from governed_memory.console._principal import Role

PASSWORD = "correct horse battery"
# The floor cost (pages_client.TEST_HASHING), wherever the cost is not what a test is
# about: at the default, the hashes were most of this file's time. The last two tests
# hash at the default on purpose.
FLOOR = PasswordHashing(**TEST_HASHING)


@pytest.fixture
def accounts_file(tmp_path: Path) -> Path:
    path = tmp_path / "accounts.json"
    add_user(path, "alice", Role.PRIVACY_OFFICER, PASSWORD, hashing=FLOOR)
    return path


def test_add_user_creates_a_0600_file_with_an_argon2id_hash_and_no_password(
    accounts_file: Path,
) -> None:
    assert stat.S_IMODE(accounts_file.stat().st_mode) == 0o600
    text = accounts_file.read_text()
    entry = json.loads(text)["accounts"]["alice"]
    assert entry["role"] == "privacy-officer"
    assert entry["hash"].startswith("$argon2id$")
    assert PASSWORD not in text


def test_the_right_password_authenticates_and_gives_a_local_principal(accounts_file: Path) -> None:
    account = Accounts(accounts_file, FLOOR).authenticate("alice", PASSWORD)
    assert account is not None
    who = account.principal()
    assert (who.name, who.role, who.source, who.actor) == (
        "alice",
        Role.PRIVACY_OFFICER,
        "local",
        "console:alice",
    )


def test_a_wrong_password_or_an_unknown_name_does_not_authenticate(accounts_file: Path) -> None:
    accounts = Accounts(accounts_file, FLOOR)
    assert accounts.authenticate("alice", PASSWORD + "x") is None
    assert accounts.authenticate("mallory", PASSWORD) is None


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o644, 0o660])
def test_a_file_group_or_others_may_read_is_refused_naming_the_mode_and_the_fix(
    accounts_file: Path, mode: int
) -> None:
    accounts_file.chmod(mode)
    with pytest.raises(AccountsFileError) as caught:
        Accounts(accounts_file).check()
    assert f"mode {mode:04o}" in str(caught.value)
    assert f"chmod 600 {accounts_file}" in str(caught.value)
    assert isinstance(caught.value, gm.ConfigurationError)


def test_a_file_owned_by_another_user_is_refused_naming_the_owner(accounts_file: Path) -> None:
    if os.geteuid() != 0:
        pytest.fail("this test changes a file's owner, which needs root (the CI runs as root)")
    os.chown(accounts_file, 4242, -1)
    with pytest.raises(AccountsFileError, match=r"owned by uid 4242.*chown 0"):
        Accounts(accounts_file).check()


def test_a_symbolic_link_is_refused(accounts_file: Path, tmp_path: Path) -> None:
    link = tmp_path / "link.json"
    link.symlink_to(accounts_file)
    with pytest.raises(AccountsFileError, match="symbolic link"):
        Accounts(link).check()


def test_a_missing_file_names_the_command_that_creates_it(tmp_path: Path) -> None:
    with pytest.raises(AccountsFileError, match="console add-user"):
        Accounts(tmp_path / "none.json").check()


def test_a_file_of_an_unknown_format_names_both_versions(accounts_file: Path) -> None:
    data = json.loads(accounts_file.read_text())
    data["format"] = 9
    accounts_file.write_text(json.dumps(data))
    with pytest.raises(AccountsFileError, match="format 9, this version reads format 1"):
        Accounts(accounts_file).check()


def test_a_file_that_is_not_json_is_refused_with_the_way_back(accounts_file: Path) -> None:
    accounts_file.write_text("{not json")
    with pytest.raises(AccountsFileError, match=r"not valid JSON.*backup"):
        Accounts(accounts_file).check()


@pytest.mark.parametrize("name", ["", "../x", "a b", "<script>", "x" * 65, "-lead"])
def test_an_account_name_outside_the_rule_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(AccountsFileError, match=r"account name .* is not allowed; use"):
        add_user(tmp_path / "a.json", name, Role.AUDITOR, PASSWORD)
    assert not (tmp_path / "a.json").exists()


def test_a_short_password_is_refused_naming_the_minimum(tmp_path: Path) -> None:
    with pytest.raises(AccountsFileError, match="has 5 characters; use at least 12"):
        add_user(tmp_path / "a.json", "bob", Role.AUDITOR, "short")


def test_an_unknown_role_is_refused_listing_the_roles(tmp_path: Path) -> None:
    with pytest.raises(AccountsFileError, match="not a console role; use one of privacy-officer"):
        add_user(tmp_path / "a.json", "bob", "root", PASSWORD)


def test_set_role_set_password_and_remove_user_change_only_that_account(
    accounts_file: Path,
) -> None:
    add_user(accounts_file, "bob", "auditor", PASSWORD, hashing=FLOOR)
    set_role(accounts_file, "bob", Role.ADMINISTRATOR)
    set_password(accounts_file, "alice", "another long passphrase", hashing=FLOOR)
    accounts = Accounts(accounts_file, FLOOR)
    assert accounts.current()["bob"].role is Role.ADMINISTRATOR
    assert accounts.authenticate("alice", PASSWORD) is None
    assert accounts.authenticate("alice", "another long passphrase") is not None
    remove_user(accounts_file, "bob")
    assert set(Accounts(accounts_file).current()) == {"alice"}
    assert stat.S_IMODE(accounts_file.stat().st_mode) == 0o600


def test_changing_an_unknown_account_names_it_and_how_to_add_it(accounts_file: Path) -> None:
    with pytest.raises(AccountsFileError, match=r"no account 'carol'.*add-user"):
        set_role(accounts_file, "carol", Role.AUDITOR)


def test_a_crash_before_the_rename_leaves_the_old_file_whole(
    accounts_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = accounts_file.read_bytes()

    def crash(src: object, dst: object) -> None:
        raise OSError(errno.EIO, "simulated crash")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(AccountsFileError, match="previous file is unchanged"):
        add_user(accounts_file, "bob", Role.AUDITOR, PASSWORD, hashing=FLOOR)
    assert accounts_file.read_bytes() == before
    assert sorted(p.name for p in accounts_file.parent.iterdir() if p.name.endswith(".tmp")) == []


def test_a_full_disk_leaves_the_old_file_whole_and_says_so(
    accounts_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = accounts_file.read_bytes()

    def full(fd: int, data: object) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", full)
    with pytest.raises(AccountsFileError, match=r"No space left on device.*free disk space"):
        add_user(accounts_file, "bob", Role.AUDITOR, PASSWORD, hashing=FLOOR)
    assert accounts_file.read_bytes() == before


def test_the_running_console_sees_a_change_made_by_another_process(accounts_file: Path) -> None:
    accounts = Accounts(accounts_file, FLOOR)
    alice = accounts.current()["alice"]
    assert accounts.still_valid(alice)
    set_role(accounts_file, "alice", Role.AUDITOR)
    assert not accounts.still_valid(alice)


def test_a_hash_under_weaker_parameters_is_upgraded_at_the_next_sign_in(tmp_path: Path) -> None:
    import argon2

    path = tmp_path / "accounts.json"
    add_user(path, "alice", Role.AUDITOR, PASSWORD, hashing=FLOOR)  # replaced by the weak hash
    data = json.loads(path.read_text())
    weak = argon2.PasswordHasher(time_cost=1, memory_cost=1024, parallelism=1).hash(PASSWORD)
    data["accounts"]["alice"]["hash"] = weak
    path.write_text(json.dumps(data))
    accounts = Accounts(path)
    account = accounts.authenticate("alice", PASSWORD)
    stored = json.loads(path.read_text())["accounts"]["alice"]["hash"]
    assert stored != weak
    assert not argon2.PasswordHasher().check_needs_rehash(stored)
    # The session's credential is the upgraded entry, so the session stays valid.
    assert account is not None and accounts.still_valid(account)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_the_configured_cost_hashes_new_passwords_and_replaces_other_hashes(
    tmp_path: Path,
) -> None:
    """`password_hashing` in the settings: new hashes use it; a default one moves to it."""
    import argon2

    hashing = PasswordHashing(time_cost=2, memory_kib=19456, parallelism=1)
    path = tmp_path / "accounts.json"
    made = add_user(path, "alice", Role.AUDITOR, PASSWORD, hashing=hashing)
    assert argon2.extract_parameters(made.hash).memory_cost == 19456
    add_user(path, "bob", Role.AUDITOR, PASSWORD)  # the default cost
    accounts = Accounts(path, hashing)
    assert accounts.authenticate("alice", PASSWORD) is not None
    assert accounts.authenticate("bob", PASSWORD) is not None
    stored = json.loads(path.read_text())["accounts"]
    assert stored["alice"]["hash"] == made.hash  # already at the configured cost: kept
    assert argon2.extract_parameters(stored["bob"]["hash"]).memory_cost == 19456
    assert accounts.authenticate("bob", "wrong password") is None
