"""Sessions: the cookie's flags, timeouts, revocation, forged cookies (_auth/_sessions.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from auth_app import FakeClock, audit_entries, client, make_app, sign_in

from governed_memory.console._auth import remove_user, set_password, set_role
from governed_memory.console._auth._sessions import SessionStore
from governed_memory.console._principal import Principal, Role


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def test_signing_in_sets_a_secure_httponly_strict_session_cookie(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path)
    response = sign_in(client(app))
    assert response.status_code == 303
    cookie = next(c for c in response.headers.get_list("set-cookie") if c.startswith("gm_session="))
    flags = {f.strip().lower() for f in cookie.split(";")[1:]}
    assert {"secure", "httponly", "samesite=strict", "path=/"} <= flags
    # A session cookie: the server, not the browser, decides when it ends.
    assert not any(f.startswith(("max-age", "expires")) for f in flags)
    value = cookie.split(";")[0].split("=", 1)[1]
    assert len(value) == 43  # 32 random bytes, base64url


def test_without_a_session_a_page_redirects_to_login_with_the_way_back(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path)
    response = client(app).get("/officer")
    assert response.status_code == 303
    assert response.headers["location"] == "/login?next=/officer"


@pytest.mark.parametrize(
    "cookie",
    ["forged", "A" * 43, "", "x" * 500, "../../etc/passwd"],
    ids=["word", "well-formed-unknown", "empty", "long", "path"],
)
def test_a_forged_cookie_is_no_session(tmp_path: Path, cookie: str) -> None:
    app, _ = make_app(tmp_path)
    c = client(app)
    c.cookies.set("gm_session", cookie, domain="testserver.local")
    assert c.get("/").status_code == 303


def test_a_tampered_cookie_is_no_session(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path)
    c = client(app)
    sign_in(c)
    real = c.cookies["gm_session"]
    c.cookies.clear()
    c.cookies.set("gm_session", real[:-1] + ("A" if real[-1] != "A" else "B"))
    assert c.get("/").status_code == 303


def test_a_session_ends_after_the_idle_timeout_and_lives_while_used(
    tmp_path: Path, clock: FakeClock
) -> None:
    app, _ = make_app(tmp_path, clock=clock, session_idle="15m", session_max="8h")
    c = client(app)
    sign_in(c)
    for _ in range(4):
        clock.advance(14 * 60)
        assert c.get("/").status_code == 200
    clock.advance(15 * 60 + 1)
    assert c.get("/").status_code == 303


def test_a_session_ends_at_the_absolute_timeout_however_busy(
    tmp_path: Path, clock: FakeClock
) -> None:
    app, _ = make_app(tmp_path, clock=clock, session_idle="15m", session_max="1h")
    c = client(app)
    sign_in(c)
    for _ in range(5):
        clock.advance(10 * 60)
        assert c.get("/").status_code == 200
    clock.advance(10 * 60 + 1)
    assert c.get("/").status_code == 303


def test_logout_revokes_the_session_on_the_server(tmp_path: Path) -> None:
    import re

    app, gov = make_app(tmp_path)
    c = client(app)
    sign_in(c)
    stolen = c.cookies["gm_session"]
    page = c.get("/form").text
    fields = dict(re.findall(r'name="(csrf_token|form_nonce)" value="([^"]*)"', page))
    response = c.post("/logout", data=fields)
    assert response.status_code == 303
    assert response.headers["location"] == "/login"
    # The old cookie, replayed by whoever kept it, is worth nothing now.
    replay = client(app)
    replay.cookies.set("gm_session", stolen)
    assert replay.get("/").status_code == 303
    assert [e["event"] for e in audit_entries(gov, "console:alice")] == [
        "console.login",
        "console.logout",
    ]


@pytest.mark.parametrize(
    "change",
    [
        lambda path: set_role(path, "alice", Role.AUDITOR),
        lambda path: set_password(path, "alice", "a brand new passphrase"),
        lambda path: remove_user(path, "alice"),
    ],
    ids=["role", "password", "removed"],
)
def test_a_change_to_the_account_revokes_its_sessions(tmp_path: Path, change: object) -> None:
    app, _ = make_app(tmp_path)
    c = client(app)
    sign_in(c)
    assert c.get("/").status_code == 200
    change(tmp_path / "accounts.json")  # type: ignore[operator]
    assert c.get("/").status_code == 303


def test_sessions_do_not_survive_a_restart(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path)
    c = client(app)
    sign_in(c)
    restarted, _ = make_app(tmp_path)
    again = client(restarted)
    again.cookies.set("gm_session", c.cookies["gm_session"])
    assert again.get("/").status_code == 303


def test_signing_in_issues_a_new_id_whatever_cookie_was_there(tmp_path: Path) -> None:
    """Session fixation: an id planted before sign-in is never the one signed in."""
    app, _ = make_app(tmp_path)
    c = client(app)
    planted = "P" * 43
    c.cookies.set("gm_session", planted)
    issued = sign_in(c).cookies["gm_session"]
    assert issued != planted
    assert len(issued) == 43


def test_the_store_ends_only_the_changed_users_sessions() -> None:
    clock = FakeClock()
    store = SessionStore(idle=60, absolute=600, now=clock)
    alice = Principal("alice", Role.AUDITOR, "local")
    bob = Principal("bob", Role.AUDITOR, "local")
    a1, _ = store.create(alice)
    a2, _ = store.create(alice)
    b1, _ = store.create(bob)
    assert store.revoke_user("alice", "local") == 2
    assert store.get(a1) is None and store.get(a2) is None
    assert store.get(b1) is not None
    assert len(store) == 1


def test_an_accounts_file_made_unsafe_ends_sessions_and_refuses_sign_in_without_its_path(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    app, _ = make_app(tmp_path)
    c = client(app)
    sign_in(c)
    (tmp_path / "accounts.json").chmod(0o644)
    assert c.get("/").status_code == 303
    refused = sign_in(client(app, ip="10.0.0.2"))
    assert refused.status_code == 503
    assert "accounts file is unsafe or unreadable" in refused.text
    assert str(tmp_path) not in refused.text
    assert "mode 0644" in caplog.text


def test_signing_in_again_after_a_lapsed_logout_goes_home(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path)
    response = client(app).post("/logout", data={})
    assert response.headers["location"] == "/login?next=/"
