"""CSRF: a per-session token and a one-time form nonce on every write (_auth/_csrf.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
from auth_app import client, form_fields, make_app, sign_in
from starlette.testclient import TestClient

from governed_memory.console._principal import Role


@pytest.fixture
def signed_in(tmp_path: Path) -> TestClient:
    app, _ = make_app(tmp_path, users={"alice": Role.PRIVACY_OFFICER, "bob": Role.AUDITOR})
    c = client(app)
    sign_in(c)
    return c


def _refused(response: object, words: str) -> None:
    assert response.status_code == 403, response.text  # type: ignore[attr-defined]
    assert 'data-page="error"' in response.text  # type: ignore[attr-defined]
    assert words in response.text  # type: ignore[attr-defined]


def test_a_form_with_its_token_and_nonce_is_accepted_once(signed_in: TestClient) -> None:
    fields = form_fields(signed_in)
    assert signed_in.post("/action", data={**fields, "what": "x"}).text == "done x"


def test_a_replayed_form_is_refused(signed_in: TestClient) -> None:
    fields = form_fields(signed_in)
    assert signed_in.post("/action", data=fields).status_code == 200
    _refused(signed_in.post("/action", data=fields), "already submitted")


def test_a_form_without_the_csrf_token_is_refused(signed_in: TestClient) -> None:
    fields = form_fields(signed_in)
    del fields["csrf_token"]
    _refused(signed_in.post("/action", data=fields), "no csrf_token")


def test_a_form_with_a_wrong_csrf_token_is_refused(signed_in: TestClient) -> None:
    fields = form_fields(signed_in)
    fields["csrf_token"] = fields["csrf_token"][:-2] + "xx"
    _refused(signed_in.post("/action", data=fields), "does not belong to this session")


def test_a_form_without_its_nonce_is_refused(signed_in: TestClient) -> None:
    fields = form_fields(signed_in)
    del fields["form_nonce"]
    _refused(signed_in.post("/action", data=fields), "no form_nonce")


def test_a_made_up_nonce_is_refused(signed_in: TestClient) -> None:
    fields = form_fields(signed_in)
    fields["form_nonce"] = "N" * 43
    _refused(signed_in.post("/action", data=fields), "already submitted (or is too old)")


def test_the_token_of_another_session_is_refused(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path, users={"alice": Role.PRIVACY_OFFICER, "bob": Role.AUDITOR})
    alice, bob = client(app), client(app)
    sign_in(alice)
    sign_in(bob, "bob")
    _refused(bob.post("/action", data=form_fields(alice)), "does not belong to this session")


def test_a_write_without_a_session_is_sent_to_login_and_not_run(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path)
    response = client(app).post("/action", data={"csrf_token": "x", "form_nonce": "y"})
    assert response.status_code == 303
    assert response.headers["location"] == "/login?next=/action"


@pytest.mark.parametrize("method", ["PUT", "PATCH", "DELETE"])
def test_other_writing_methods_are_guarded_too(signed_in: TestClient, method: str) -> None:
    response = signed_in.request(method, "/action", data={"csrf_token": "x"})
    assert response.status_code == 403


def test_a_write_that_is_not_a_form_is_refused(signed_in: TestClient) -> None:
    fields = form_fields(signed_in)
    response = signed_in.post("/action", json=fields)
    _refused(response, "must be a form posted from the console")


def test_a_multipart_form_is_checked_like_any_other(signed_in: TestClient) -> None:
    fields = form_fields(signed_in)
    files = {"upload": ("a.txt", b"hello", "text/plain")}
    response = signed_in.post("/action", data={**fields, "what": "m"}, files=files)
    assert response.text == "done m"
    _refused(signed_in.post("/action", data=fields, files=files), "already submitted")


def test_an_oversized_form_is_refused_before_it_is_parsed(signed_in: TestClient) -> None:
    fields = form_fields(signed_in)
    response = signed_in.post("/action", data={**fields, "what": "x" * (1024 * 1024 + 1)})
    assert response.status_code == 413


def test_csrf_fields_render_a_fresh_nonce_each_time(signed_in: TestClient) -> None:
    first, second = form_fields(signed_in), form_fields(signed_in)
    assert first["csrf_token"] == second["csrf_token"]
    assert first["form_nonce"] != second["form_nonce"]
    # Both are open at once (two tabs) and each is accepted once.
    assert signed_in.post("/action", data=second).status_code == 200
    assert signed_in.post("/action", data=first).status_code == 200


def test_the_sign_in_form_without_its_token_is_refused(tmp_path: Path) -> None:
    from auth_app import PASSWORD

    app, _ = make_app(tmp_path)
    c = client(app)
    c.get("/login")
    response = c.post("/login", data={"username": "alice", "password": PASSWORD})
    _refused(response, "sign-in form has no valid csrf_token")
    assert "gm_session" not in response.cookies


def test_a_sign_in_form_token_from_another_browser_is_refused(tmp_path: Path) -> None:
    from auth_app import PASSWORD, login_token

    app, _ = make_app(tmp_path)
    attacker, victim = client(app), client(app)
    token = login_token(attacker)
    victim.get("/login")
    response = victim.post(
        "/login", data={"username": "alice", "password": PASSWORD, "csrf_token": token}
    )
    _refused(response, "csrf_token does not match")


def test_a_wrong_role_gets_a_403_page_naming_the_role_needed(tmp_path: Path) -> None:
    from auth_app import audit_entries

    app, gov = make_app(tmp_path, users={"bob": Role.AUDITOR})
    c = client(app)
    sign_in(c, "bob")
    _refused(c.get("/officer"), "needs the role privacy-officer; bob is signed in as auditor")
    denied = [e for e in audit_entries(gov, "console:bob") if e["event"] == "console.access"]
    assert denied[0]["attrs"]["outcome"] == "denied"
    assert denied[0]["attrs"]["reason_code"] == "wrong_role"


def test_a_refused_form_is_audited_with_the_actor_and_the_reason(tmp_path: Path) -> None:
    from auth_app import audit_entries

    app, gov = make_app(tmp_path)
    c = client(app)
    sign_in(c)
    fields = form_fields(c)
    c.post("/action", data=fields)
    c.post("/action", data=fields)
    c.post("/action", data={"form_nonce": fields["form_nonce"]})
    refused = [
        e["attrs"] for e in audit_entries(gov, "console:alice") if e["event"] == "console.csrf"
    ]
    assert [(a["outcome"], a["reason_code"]) for a in refused] == [
        ("denied", "replayed_form"),
        ("denied", "missing_token"),
    ]


def test_an_oversized_sign_in_form_is_refused(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path)
    response = client(app).post("/login", data={"username": "a" * (17 * 1024)})
    assert response.status_code == 413


@pytest.mark.parametrize(
    "target",
    ["//evil.example/x", "https://evil.example/", "/\\evil.example", "javascript:alert(1)", "x"],
)
def test_the_way_back_after_sign_in_never_leaves_the_console(tmp_path: Path, target: str) -> None:
    from auth_app import PASSWORD, login_token

    app, _ = make_app(tmp_path)
    c = client(app)
    token = login_token(c)
    done = c.post(
        "/login",
        data={"username": "alice", "password": PASSWORD, "csrf_token": token, "next": target},
    )
    assert done.status_code == 303
    assert done.headers["location"] == "/"


def test_the_way_back_after_sign_in_keeps_a_console_path(tmp_path: Path) -> None:
    from auth_app import PASSWORD, login_token

    app, _ = make_app(tmp_path)
    c = client(app)
    token = login_token(c)
    done = c.post(
        "/login",
        data={
            "username": "alice",
            "password": PASSWORD,
            "csrf_token": token,
            "next": "/officer?x=1",
        },
    )
    assert done.headers["location"] == "/officer?x=1"
    # Signed in, /login sends the user on instead of showing the form again.
    assert c.get("/login?next=/officer").headers["location"] == "/officer"
