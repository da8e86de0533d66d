"""ConsoleConfig: the TOML file, the environment, the natural forms and the refusals (_config.py)."""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

import governed_memory as gm
from governed_memory.console._config import ConsoleConfig, load_console_config
from governed_memory.console._principal import Role


def _toml(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "console.toml"
    path.write_text(text)
    return path


def test_the_defaults_are_loopback_15_minutes_idle_and_8_hours(tmp_path: Path) -> None:
    config = load_console_config(accounts_file=tmp_path / "a.json")
    assert (config.host, config.port, config.tls) == ("127.0.0.1", 8765, False)
    assert config.session_idle == dt.timedelta(minutes=15)
    assert config.session_max == dt.timedelta(hours=8)
    assert (config.login_rate.attempts, config.login_rate.window) == (5, dt.timedelta(minutes=1))


def test_a_toml_file_gives_every_setting_in_its_natural_form(tmp_path: Path) -> None:
    path = _toml(
        tmp_path,
        """
port = 9000
accounts_file = "/srv/console/accounts.json"
session_idle = "10m"
session_max = "4h30m"
login_rate = "10/15m"

[oidc]
issuer = "https://login.bank.example/realms/staff/"
client_id = "governed-memory"
client_secret = "s3cret"
allowed_groups = ["dpo", "audit"]

[role_map]
dpo = "privacy-officer"
audit = "auditor"
""",
    )
    config = load_console_config(path)
    assert config.port == 9000
    assert config.session_max == dt.timedelta(hours=4, minutes=30)
    assert (config.login_rate.attempts, config.login_rate.window) == (10, dt.timedelta(minutes=15))
    assert config.oidc is not None
    assert config.oidc.issuer == "https://login.bank.example/realms/staff"
    assert config.oidc.client_secret.get_secret_value() == "s3cret"
    assert "s3cret" not in repr(config)
    assert config.role_map == {"dpo": Role.PRIVACY_OFFICER, "audit": Role.AUDITOR}


def test_the_environment_overrides_the_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _toml(tmp_path, 'port = 9000\naccounts_file = "a.json"\n')
    monkeypatch.setenv("GOVERNED_MEMORY_CONSOLE_PORT", "9100")
    monkeypatch.setenv("GOVERNED_MEMORY_CONSOLE_SESSION_IDLE", "5m")
    config = load_console_config(path)
    assert (config.port, config.session_idle) == (9100, dt.timedelta(minutes=5))


def test_the_oidc_table_may_come_from_nested_variables(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GOVERNED_MEMORY_CONSOLE_OIDC__ISSUER", "https://idp.example")
    monkeypatch.setenv("GOVERNED_MEMORY_CONSOLE_OIDC__CLIENT_ID", "console")
    monkeypatch.setenv("GOVERNED_MEMORY_CONSOLE_OIDC__CLIENT_SECRET", "s")
    monkeypatch.setenv("GOVERNED_MEMORY_CONSOLE_ROLE_MAP", '{"dpo": "privacy-officer"}')
    config = load_console_config()
    assert config.oidc is not None and config.oidc.client_id == "console"
    assert config.role_map == {"dpo": Role.PRIVACY_OFFICER}


def test_the_config_file_may_come_from_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _toml(tmp_path, 'port = 9200\naccounts_file = "a.json"\n')
    monkeypatch.setenv("GOVERNED_MEMORY_CONSOLE_CONFIG_FILE", str(path))
    assert load_console_config().port == 9200


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({}, "no way to sign in is configured; set accounts_file"),
        ({"host": "0.0.0.0"}, "not a loopback address and no TLS is configured"),
        ({"tls_cert": "c.pem"}, "tls_cert and tls_key go together"),
        ({"session_idle": "9h"}, "at most session_max"),
        ({"session_idle": "soon"}, "'soon' is not a duration; write <number><unit>"),
        ({"login_rate": "lots"}, "'lots' is not a rate; write '<attempts>/<window>'"),
        ({"role_map": {"g": "superuser"}}, "role_map.g"),
        (
            {"oidc": {"issuer": "http://idp.example", "client_id": "c", "client_secret": "s"}},
            "is not an https URL",
        ),
        ({"colour": "blue"}, "console setting colour"),
        (
            {"password_hashing": {"memory_kib": 1024}},
            "password_hashing.memory_kib: Input should be greater than or equal to 19456",
        ),
    ],
    ids=[
        "no-sign-in",
        "public-without-tls",
        "half-tls",
        "idle-over-max",
        "bad-duration",
        "bad-rate",
        "bad-role",
        "http-issuer",
        "unknown-key",
        "hashing-below-owasp",
    ],
)
def test_a_bad_setting_is_one_line_naming_it_and_the_fix(
    tmp_path: Path, overrides: dict[str, object], words: str
) -> None:
    if "no way to sign in" not in words:
        overrides.setdefault("accounts_file", "a.json")
    with pytest.raises(gm.ConfigurationError) as caught:
        load_console_config(**overrides)
    assert words in str(caught.value)
    assert "\n" not in str(caught.value)


def test_a_public_bind_is_accepted_behind_a_tls_proxy(tmp_path: Path) -> None:
    config = load_console_config(
        host="0.0.0.0", behind_proxy=True, forwarded_allow_ips=["10.0.0.5"], accounts_file="a"
    )
    assert config.forwarded_allow_ips == ("10.0.0.5",)


def test_a_missing_or_broken_config_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(gm.ConfigurationError, match="does not exist; pass an existing file"):
        load_console_config(tmp_path / "none.toml")
    with pytest.raises(gm.ConfigurationError, match="is not valid TOML"):
        load_console_config(_toml(tmp_path, "port = = 1"))


def test_the_config_is_frozen(tmp_path: Path) -> None:
    config = ConsoleConfig(accounts_file=tmp_path / "a.json")
    with pytest.raises(ValueError, match="frozen"):
        config.port = 1  # type: ignore[misc]


def test_the_stub_provider_runs_from_a_shell_for_the_browser_tests() -> None:
    script = Path(__file__).with_name("oidc_provider.py")
    child = subprocess.Popen(
        [sys.executable, str(script), "--user", "olga=dpo", "--auto-approve", "olga"],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        line = child.stdout.readline().strip()
        assert line.startswith("issuer=http://127.0.0.1:")
        issuer = line.removeprefix("issuer=")
        meta = httpx.get(f"{issuer}/.well-known/openid-configuration").json()
        assert meta["issuer"] == issuer
        assert httpx.get(meta["jwks_uri"]).json()["keys"][0]["kty"] == "RSA"
    finally:
        child.terminate()
        child.wait(timeout=30)
        if child.stdout is not None:
            child.stdout.close()


def test_a_secret_key_file_others_may_read_or_too_short_is_refused(tmp_path: Path) -> None:
    from governed_memory.console._auth._context import read_secret_key

    key = tmp_path / "secret"
    key.write_text("k" * 44)
    key.chmod(0o644)
    with pytest.raises(gm.ConfigurationError, match=r"mode 0644; it must be 0600"):
        read_secret_key(key)
    key.chmod(0o600)
    assert read_secret_key(key) == b"k" * 44
    key.write_text("short")
    with pytest.raises(gm.ConfigurationError, match="holds 5 bytes; it needs at least 32"):
        read_secret_key(key)
    with pytest.raises(gm.ConfigurationError, match="cannot be read"):
        read_secret_key(tmp_path / "none")


def test_sign_in_tokens_made_under_one_secret_key_hold_across_a_restart(tmp_path: Path) -> None:
    """With secret_key_file, a sign-in page opened before a restart still posts after it."""
    from auth_app import PASSWORD, client, login_token, make_app

    key = tmp_path / "secret"
    key.write_text("s" * 44)
    key.chmod(0o600)
    first, _ = make_app(tmp_path, secret_key_file=key)
    browser = client(first)
    token = login_token(browser)
    restarted, _ = make_app(tmp_path, secret_key_file=key)
    again = client(restarted)
    again.cookies = browser.cookies
    done = again.post(
        "/login", data={"username": "alice", "password": PASSWORD, "csrf_token": token}
    )
    assert done.status_code == 303
