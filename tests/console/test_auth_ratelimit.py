"""Login rate limits: a sliding window per user and per client IP (_auth/_ratelimit.py)."""

from __future__ import annotations

from pathlib import Path

from auth_app import PASSWORD, FakeClock, audit_entries, client, make_app, sign_in

from governed_memory.console._auth._ratelimit import SlidingWindowLimiter
from governed_memory.console._principal import Role


def test_the_window_slides_attempt_by_attempt() -> None:
    clock = FakeClock()
    limiter = SlidingWindowLimiter(attempts=3, window=60, now=clock)
    for _ in range(3):
        assert limiter.attempt(["k"]) is None
        clock.advance(10)
    # The oldest attempt (30 s ago) leaves the window in 30 s.
    assert limiter.attempt(["k"]) == 30
    clock.advance(30)
    assert limiter.attempt(["k"]) is None
    assert limiter.attempt(["k"]) == 10


def test_a_refused_attempt_is_not_counted() -> None:
    clock = FakeClock()
    limiter = SlidingWindowLimiter(attempts=1, window=60, now=clock)
    assert limiter.attempt(["k"]) is None
    for _ in range(5):
        assert limiter.attempt(["k"]) is not None
    clock.advance(60)
    assert limiter.attempt(["k"]) is None


def test_the_limiter_forgets_the_least_recent_keys_past_its_bound() -> None:
    limiter = SlidingWindowLimiter(attempts=1, window=60, now=FakeClock(), max_keys=2)
    for key in ("a", "b", "c"):
        assert limiter.attempt([key]) is None
    assert limiter.attempt(["a"]) is None  # forgotten, so allowed again
    assert limiter.attempt(["c"]) is not None


def test_too_many_attempts_for_one_user_get_429_with_retry_after(tmp_path: Path) -> None:
    clock = FakeClock()
    app, gov = make_app(tmp_path, clock=clock, login_rate="3/minute")
    for i in range(3):
        assert sign_in(client(app, ip=f"10.0.0.{i}"), password="wrong password!").status_code == 401
    # Even the right password, from yet another address: the user's window is full.
    response = sign_in(client(app, ip="10.0.0.9"))
    assert response.status_code == 429
    assert response.headers["retry-after"] == "60"
    assert "try again in 60 seconds" in response.text
    assert "gm_session" not in response.cookies
    clock.advance(61)
    assert sign_in(client(app, ip="10.0.0.9")).status_code == 303
    codes = [e["attrs"].get("reason_code") for e in audit_entries(gov, "console:alice")]
    assert codes == ["bad_credentials"] * 3 + ["rate_limited", None]


def test_too_many_attempts_from_one_address_get_429_whatever_the_name(tmp_path: Path) -> None:
    clock = FakeClock()
    app, _ = make_app(tmp_path, clock=clock, login_rate="3/minute", users={"alice": Role.AUDITOR})
    c = client(app, ip="192.0.2.7")
    for name in ("root", "admin", "dpo"):
        assert sign_in(c, name).status_code == 401
    response = sign_in(c, "alice")
    assert response.status_code == 429
    assert "from 192.0.2.7" in response.text
    # Another address is not held back by this one.
    assert sign_in(client(app, ip="192.0.2.8")).status_code == 303


def test_a_failed_sign_in_says_nothing_about_which_part_was_wrong(tmp_path: Path) -> None:
    app, _ = make_app(tmp_path)
    unknown = sign_in(client(app), "nobody", PASSWORD)
    wrong = sign_in(client(app, ip="10.0.0.2"), "alice", "not the password")
    assert unknown.status_code == wrong.status_code == 401
    assert "the user name or the password is wrong" in unknown.text
    assert "the user name or the password is wrong" in wrong.text
