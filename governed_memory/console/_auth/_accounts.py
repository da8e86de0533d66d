"""Local console accounts: a JSON file of Argon2id password hashes, readable only by the service.

The file (``accounts_file``) looks like::

    {"format": 1, "accounts": {"alice": {"role": "privacy-officer",
                                         "hash": "$argon2id$v=19$m=65536,t=3,p=4$..."}}}

It must be a regular file of mode 0600 (or stricter) owned by the user the
console runs as; anything else is refused with the mode and the ``chmod`` /
``chown`` that fixes it, since a hash others can read is a hash others can
crack offline. Every change (:func:`add_user`, :func:`remove_user`,
:func:`set_password`, :func:`set_role`) writes a new file beside the old one,
fsyncs it and renames it over, under an exclusive lock, so a crash or a full
disk leaves the old file or the new one, never a torn one.

Passwords are hashed with argon2-cffi's :class:`~argon2.PasswordHasher`
(Argon2id, the RFC 9106 defaults); a hash made under weaker parameters (an
older argon2-cffi) is replaced at the account's next successful sign-in. A
login against an unknown name still spends one verification, so the time
taken does not tell which names exist.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import re
import stat
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import argon2
from argon2.exceptions import InvalidHashError, VerificationError, VerifyMismatchError

import governed_memory as gm

from .._config import PasswordHashing
from .._principal import Principal, Role

AccountsFileError = gm.AccountsFileError  # defined with the library's errors (_errors)

__all__ = [
    "MIN_PASSWORD_LENGTH",
    "Account",
    "Accounts",
    "AccountsFileError",
    "add_user",
    "remove_user",
    "set_password",
    "set_role",
]

FORMAT = 1
logger = logging.getLogger("governed_memory.console")
MIN_PASSWORD_LENGTH = 12
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")


def _hasher(hashing: PasswordHashing | None) -> argon2.PasswordHasher:
    """The hasher of ``hashing`` (None: the default parameters)."""
    hasher: argon2.PasswordHasher = (hashing or PasswordHashing()).hasher()
    return hasher


@dataclass(frozen=True)
class Account:
    """One local account: its name, role and Argon2 hash."""

    name: str
    role: Role
    hash: str

    def principal(self) -> Principal:
        """The :class:`Principal` this account signs in as."""
        return Principal(name=self.name, role=self.role, source="local")


def _check_name(name: str) -> str:
    if not isinstance(name, str) or not _NAME.match(name):
        raise AccountsFileError(
            f"account name {name!r} is not allowed; use 1-64 letters, digits, '.', '_', '-' or "
            "'@', starting with a letter or digit"
        )
    return name


def _check_role(role: Role | str) -> Role:
    try:
        return Role(role)
    except ValueError:
        roles = ", ".join(r.value for r in Role)
        raise AccountsFileError(
            f"role {role!r} is not a console role; use one of {roles}"
        ) from None


def _check_password(password: str) -> str:
    if len(password) < MIN_PASSWORD_LENGTH:
        raise AccountsFileError(
            f"the password has {len(password)} characters; use at least {MIN_PASSWORD_LENGTH} "
            "(a passphrase of several words is easiest to remember)"
        )
    return password


def check_file_safety(path: Path, st: os.stat_result) -> None:
    """Refuse a file that is not a regular file of mode 0600 owned by this process's user."""
    if not stat.S_ISREG(st.st_mode):
        raise AccountsFileError(f"accounts file {path} is not a regular file; point to a file")
    mode = stat.S_IMODE(st.st_mode)
    if mode & 0o077:
        raise AccountsFileError(
            f"accounts file {path} has mode {mode:04o}, so group or others may read the password "
            f"hashes; it must be 0600: run `chmod 600 {path}`"
        )
    if st.st_uid != os.geteuid():
        raise AccountsFileError(
            f"accounts file {path} is owned by uid {st.st_uid}, not by the user the console runs "
            f"as (uid {os.geteuid()}); run `chown {os.geteuid()} {path}` as root"
        )


def _parse(path: Path, text: str) -> dict[str, Account]:
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise AccountsFileError(
            f"accounts file {path} is not valid JSON ({exc}); restore it from a backup or "
            "recreate it with `governed-memory console add-user`"
        ) from exc
    if not isinstance(data, dict) or not isinstance(data.get("accounts"), dict):
        raise AccountsFileError(
            f"accounts file {path} has no 'accounts' table; recreate it with "
            "`governed-memory console add-user`"
        )
    if data.get("format") != FORMAT:
        raise AccountsFileError(
            f"accounts file {path} has format {data.get('format')!r}, this version reads format "
            f"{FORMAT}; it was probably written by a newer governed-memory: upgrade this one"
        )
    accounts: dict[str, Account] = {}
    for name, entry in data["accounts"].items():
        if not isinstance(entry, dict) or not isinstance(entry.get("hash"), str):
            raise AccountsFileError(
                f"accounts file {path}: account {name!r} has no password hash; set one with "
                "`governed-memory console add-user` (it replaces the entry)"
            )
        accounts[name] = Account(
            name=_check_name(name), role=_check_role(entry.get("role", "")), hash=entry["hash"]
        )
    return accounts


def _render(accounts: Mapping[str, Account]) -> bytes:
    table = {a.name: {"role": a.role.value, "hash": a.hash} for a in accounts.values()}
    return (
        json.dumps({"format": FORMAT, "accounts": table}, indent=2, sort_keys=True) + "\n"
    ).encode()


_Stamp = tuple[int, int, int, int, int, int]


def _stamp(st: os.stat_result) -> _Stamp:
    """What identifies one state of the file; the ctime and mode catch a chmod or chown too."""
    return (st.st_ino, st.st_mtime_ns, st.st_ctime_ns, st.st_size, st.st_mode, st.st_uid)


def _read(path: Path) -> tuple[dict[str, Account], _Stamp]:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise AccountsFileError(
            f"accounts file {path} cannot be opened: {exc.strerror}; check that it exists, is "
            "not a symbolic link and that the console's user may read it"
        ) from exc
    with os.fdopen(fd, "rb") as handle:
        st = os.fstat(handle.fileno())
        check_file_safety(path, st)
        raw = handle.read()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise AccountsFileError(f"accounts file {path} is not UTF-8 text; restore it") from exc
    return _parse(path, text), _stamp(st)


@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    """Serialise changes to ``path`` across processes (a lock file beside it)."""
    lock = path.with_name(path.name + ".lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _write(path: Path, accounts: Mapping[str, Account]) -> None:
    """Replace ``path`` with ``accounts``: temporary file (0600), fsync, rename, fsync folder."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    data = _render(accounts)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
        folder = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(folder)
        finally:
            os.close(folder)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise AccountsFileError(
            f"accounts file {path} could not be written ({exc.strerror}); the previous file is "
            "unchanged: free disk space or fix the folder's permissions and run it again"
        ) from exc


def _change(path: Path, edit: Any) -> None:
    path = Path(path)
    if not path.parent.is_dir():
        raise AccountsFileError(
            f"the folder of accounts file {path} does not exist; create {path.parent} first"
        )
    with _locked(path):
        try:
            accounts, _ = _read(path)
        except FileNotFoundError:
            accounts = {}
        edit(accounts)
        _write(path, accounts)


def add_user(
    path: Path,
    name: str,
    role: Role | str,
    password: str,
    *,
    hashing: PasswordHashing | None = None,
) -> Account:
    """Add (or replace) the account ``name`` with ``role`` and a hash of ``password``.

    Creates the file (mode 0600) when it does not exist. ``hashing``: the Argon2
    cost (the console settings' ``password_hashing``; None: the default).

    Raises:
        AccountsFileError: the name, role or password breaks a rule, or the file is unsafe.
    """
    account = Account(
        name=_check_name(name),
        role=_check_role(role),
        hash=_hasher(hashing).hash(_check_password(password)),
    )

    def edit(accounts: dict[str, Account]) -> None:
        accounts[account.name] = account

    _change(path, edit)
    return account


def _edit_existing(path: Path, name: str, update: Any) -> None:
    def edit(accounts: dict[str, Account]) -> None:
        if name not in accounts:
            raise AccountsFileError(
                f"there is no account {name!r} in {path}; add it with "
                "`governed-memory console add-user`"
            )
        update(accounts)

    _change(path, edit)


def remove_user(path: Path, name: str) -> None:
    """Remove the account ``name``; its sessions end at their next request."""
    _edit_existing(path, name, lambda accounts: accounts.pop(name))


def set_password(
    path: Path, name: str, password: str, *, hashing: PasswordHashing | None = None
) -> None:
    """Replace the password of ``name``; its sessions end at their next request."""
    new_hash = _hasher(hashing).hash(_check_password(password))

    def update(accounts: dict[str, Account]) -> None:
        accounts[name] = Account(name=name, role=accounts[name].role, hash=new_hash)

    _edit_existing(path, name, update)


def set_role(path: Path, name: str, role: Role | str) -> None:
    """Change the role of ``name``; its sessions end at their next request."""
    new_role = _check_role(role)

    def update(accounts: dict[str, Account]) -> None:
        accounts[name] = Account(name=name, role=new_role, hash=accounts[name].hash)

    _edit_existing(path, name, update)


class Accounts:
    """The accounts file as the running console reads it (re-read when the file changes).

    Args:
        path: the accounts file.
        hashing: the Argon2 cost of new hashes (None: the default); a hash made under
            other parameters is replaced at its user's next sign-in.
    """

    def __init__(self, path: Path, hashing: PasswordHashing | None = None) -> None:
        self.path = Path(path)
        self._hasher = _hasher(hashing)
        # Verified against when the name is unknown, so a miss costs what a hit costs.
        self._dummy_hash = self._hasher.hash("governed-memory console: no such account")
        self._lock = threading.Lock()
        self._cache: tuple[_Stamp, dict[str, Account]] | None = None

    def check(self) -> None:
        """Read the file now, so an unsafe or missing file stops the console at start.

        Raises:
            AccountsFileError: the file is missing, unsafe or malformed.
        """
        self.current()

    def current(self) -> dict[str, Account]:
        """The accounts as the file holds them now."""
        try:
            st = os.stat(self.path)
        except FileNotFoundError as exc:
            raise AccountsFileError(
                f"accounts file {self.path} does not exist; create the first account with "
                f"`governed-memory console add-user NAME --role ROLE`"
            ) from exc
        stamp = _stamp(st)
        with self._lock:
            if self._cache is not None and self._cache[0] == stamp:
                return self._cache[1]
        try:
            accounts, stamp = _read(self.path)
        except FileNotFoundError as exc:
            raise AccountsFileError(f"accounts file {self.path} disappeared while read") from exc
        with self._lock:
            self._cache = (stamp, accounts)
        return accounts

    def authenticate(self, name: str, password: str) -> Account | None:
        """The account if ``password`` is right for ``name``, else None (same cost either way)."""
        account = self.current().get(name)
        try:
            self._hasher.verify(account.hash if account else self._dummy_hash, password)
        except (VerifyMismatchError, VerificationError, InvalidHashError):
            return None
        if account is not None and self._hasher.check_needs_rehash(account.hash):
            account = self._rehash(account, password)
        return account

    def _rehash(self, account: Account, password: str) -> Account:
        """Store a hash under today's Argon2 parameters (the password is known only now).

        Skipped, keeping the old hash, when the entry changed meanwhile or the file
        cannot be written (a read-only mount): the sign-in itself still succeeds.
        """
        fresh = Account(name=account.name, role=account.role, hash=self._hasher.hash(password))

        def edit(accounts: dict[str, Account]) -> None:
            if accounts.get(account.name) == account:
                accounts[account.name] = fresh

        try:
            _change(self.path, edit)
        except AccountsFileError as exc:
            logger.warning(
                "console: the password hash of %s was not upgraded: %s", account.name, exc
            )
            return account
        return self.current().get(account.name, account)

    def still_valid(self, account: Account) -> bool:
        """Whether ``account`` is unchanged in the file (not removed, re-roled or re-passworded)."""
        return self.current().get(account.name) == account
