"""GovernedSession keeps the SDK's Session contract: items round-trip, in order, limit, pop, clear."""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from agents.memory import Session, SessionABC, SessionSettings
from hypothesis import given, settings
from hypothesis import strategies as st
from oai_helpers import SUBJECT, Setup, run

from governed_memory import ConfigurationError, InvalidAgentNameError
from governed_memory.integrations.openai_agents import GovernedSession


def items(n: int, start: int = 0) -> list[dict[str, Any]]:
    return [{"role": "user", "content": f"message {i}"} for i in range(start, start + n)]


def session(setup: Setup, session_id: str = "conv-1", **kwargs: Any) -> GovernedSession:
    return GovernedSession(session_id, subject_id=SUBJECT, governance=setup.gov, **kwargs)


def test_it_is_an_sdk_session(setup: Setup) -> None:
    s = session(setup)
    assert isinstance(s, SessionABC) and isinstance(s, Session)
    assert s.session_id == "conv-1" and s.session_settings is None


def test_get_items_returns_what_add_items_got_in_order(setup: Setup) -> None:
    s = session(setup)
    run(s.add_items(items(3)))
    run(s.add_items(items(2, start=3)))
    assert run(s.get_items()) == items(5)


def test_get_items_with_a_limit_returns_the_newest_in_chronological_order(setup: Setup) -> None:
    s = session(setup)
    run(s.add_items(items(5)))
    assert run(s.get_items(2)) == items(2, start=3)
    assert run(s.get_items(9)) == items(5)
    assert run(s.get_items(0)) == []
    assert run(s.get_items(-1)) == items(5)  # negative: no limit, as the SDK's SQLiteSession


def test_session_settings_limit_is_the_default_limit(setup: Setup) -> None:
    s = session(setup, session_settings=SessionSettings(limit=2))
    run(s.add_items(items(4)))
    assert run(s.get_items()) == items(2, start=2)
    assert run(s.get_items(3)) == items(3, start=1)  # an explicit limit wins


def test_add_items_of_nothing_writes_nothing(setup: Setup) -> None:
    s = session(setup)
    run(s.add_items([]))
    assert run(s.get_items()) == []
    assert not (setup.workspace / "agents" / "conv-1").exists()


def test_pop_item_on_an_empty_session_returns_none(setup: Setup) -> None:
    assert run(session(setup).pop_item()) is None


def test_pop_item_removes_and_returns_the_newest_item(setup: Setup) -> None:
    s = session(setup)
    run(s.add_items(items(3)))
    assert run(s.pop_item()) == items(1, start=2)[0]
    assert run(s.get_items()) == items(2)
    # removed from disk too: a new session on the same id sees two items
    assert run(session(setup).get_items()) == items(2)
    assert run(s.pop_item()) == items(1, start=1)[0]
    assert run(s.pop_item()) == items(1)[0]
    assert run(s.pop_item()) is None


def test_clear_session_deletes_every_item(setup: Setup) -> None:
    s = session(setup)
    run(s.add_items(items(3)))
    run(s.clear_session())
    assert run(s.get_items()) == []
    assert run(session(setup).get_items()) == []
    run(s.add_items(items(1)))  # the session is usable after a clear
    assert run(s.get_items()) == items(1)


def test_a_new_session_on_the_same_id_resumes_the_items(setup: Setup) -> None:
    run(session(setup).add_items(items(2)))
    restarted = GovernedSession("conv-1", subject_id=SUBJECT, governance=setup.new_governance())
    assert run(restarted.get_items()) == items(2)


def test_sessions_are_separate_by_id(setup: Setup) -> None:
    run(session(setup, "a").add_items(items(1)))
    run(session(setup, "b").add_items(items(1, start=1)))
    assert run(session(setup, "a").get_items()) == items(1)
    assert run(session(setup, "b").get_items()) == items(1, start=1)


SDK_ITEMS: list[dict[str, Any]] = [
    {"role": "user", "content": "Hello"},
    {
        "id": "__fake_id__",
        "content": [{"annotations": [], "text": "hi", "type": "output_text", "logprobs": []}],
        "role": "assistant",
        "status": "completed",
        "type": "message",
    },
    {"type": "function_call", "call_id": "c1", "name": "lookup", "arguments": '{"q": 1}'},
    {"type": "function_call_output", "call_id": "c1", "output": "42"},
    {"type": "reasoning", "id": "r1", "summary": [], "content": None},
    {"role": "user", "content": [{"type": "input_text", "text": "### Human — 2026\n---"}]},
]


def test_sdk_item_shapes_round_trip_exactly(setup: Setup) -> None:
    s = session(setup)
    run(s.add_items(SDK_ITEMS))
    got = run(session(setup).get_items())
    assert got == SDK_ITEMS
    assert [list(i) for i in got] == [list(i) for i in SDK_ITEMS]  # key order too


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=8,
)


_EXAMPLES = itertools.count()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.dictionaries(st.text(), JSON, max_size=4), min_size=1, max_size=3))
def test_any_json_object_round_trips(batch: list[dict[str, Any]]) -> None:
    """Lone surrogates, line breaks, U+2028, header-shaped text: what went in comes out.

    Default mode (the test's own workspace, a new session per example): the
    record format is the concern here; the encrypted store returns the same text.
    """
    s = GovernedSession(f"h{next(_EXAMPLES)}", governance=None)
    run(s.add_items(batch))
    assert run(s.get_items()) == batch
    assert run(GovernedSession(s.session_id, governance=None).get_items()) == batch


@pytest.mark.parametrize(
    "bad",
    ["../x", "a/b", "", ".", "..", "x\ny", " lead", "a" * 256, "nul\x00"],
    ids=["dotdot", "slash", "empty", "dot", "dotdot-only", "newline", "space", "long", "nul"],
)
def test_a_bad_session_id_is_a_clear_error(setup: Setup, bad: str) -> None:
    with pytest.raises(
        InvalidAgentNameError, match=r"session_id .* cannot name the session's folder"
    ):
        GovernedSession(bad, governance=setup.gov)
    assert not (setup.workspace / "agents").exists()


def test_a_session_id_that_is_not_a_string_is_a_clear_error(setup: Setup) -> None:
    with pytest.raises(InvalidAgentNameError, match=r"session_id 7 is a int; pass a string"):
        GovernedSession(7, governance=setup.gov)  # type: ignore[arg-type]


def test_an_item_that_is_not_json_is_refused_and_nothing_is_written(setup: Setup) -> None:
    s = session(setup)
    with pytest.raises(
        ConfigurationError, match=r"item 1 of session 'conv-1' cannot be stored as JSON"
    ):
        run(s.add_items([{"role": "user", "content": "ok"}, {"role": "user", "content": object()}]))
    with pytest.raises(
        ConfigurationError, match=r"item 0 of session 'conv-1' is a str, not a dict"
    ):
        run(s.add_items(["hello"]))  # type: ignore[list-item]
    assert run(s.get_items()) == []


def test_a_bad_subject_id_is_a_clear_error(setup: Setup) -> None:
    with pytest.raises(ConfigurationError, match="subject_id"):
        GovernedSession("conv-1", subject_id="a\nb", governance=setup.gov)


def test_a_lone_surrogate_round_trips(setup: Setup) -> None:
    s = session(setup)
    run(s.add_items([{"role": "user", "content": "half \ud800 of a pair"}]))
    assert run(session(setup).get_items()) == [{"role": "user", "content": "half \ud800 of a pair"}]
