"""The litellm boundary: lazy import, offline switches, no network at import or first call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from llm_stub import StubLLM

from governed_memory import ModelCallError
from governed_memory._memory._llm import OFFLINE_ENV, ChatReply, ToolCall, chat_completion

TESTS = Path(__file__).parents[1]


def python(code: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run ``code`` in a fresh interpreter; it prints one JSON document."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("LITELLM_")}
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        env={**base, **(env or {})},
        timeout=120,
        check=True,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_importing_the_package_does_not_import_litellm_or_tiktoken() -> None:
    result = python(
        """
        import json, sys, governed_memory
        print(json.dumps({m: m in sys.modules for m in ("litellm", "tiktoken")}))
        """
    )
    assert result == {"litellm": False, "tiktoken": False}


def test_litellm_is_imported_offline_and_user_settings_win() -> None:
    """Every connection and lookup is recorded: importing litellm and reading its model table make none."""
    result = python(
        f"""
        import json, os, socket, sys
        sys.path.insert(0, {str(TESTS)!r})
        attempts = []
        real = socket.getaddrinfo
        def lookup(host, *a, **k):
            attempts.append(str(host))
            raise socket.gaierror("blocked")
        socket.getaddrinfo = lookup
        real_connect = socket.socket.connect
        def connect(self, address):
            attempts.append(str(address))
            raise OSError("blocked")
        socket.socket.connect = connect
        from governed_memory._memory._llm import import_litellm, model_input_window
        import_litellm()
        window = model_input_window("gpt-4o-mini")
        unknown = model_input_window("openai/house-model")
        names = {json.dumps(sorted(OFFLINE_ENV))}
        print(json.dumps({{"attempts": attempts, "window": window, "unknown": unknown,
                           "env": {{n: os.environ.get(n) for n in names}}}}))
        """,
        env={"LITELLM_LOCAL_BLOG_POSTS": "False"},
    )
    assert result["attempts"] == []
    assert result["window"] == 128000 and result["unknown"] is None
    assert result["env"] == {**OFFLINE_ENV, "LITELLM_LOCAL_BLOG_POSTS": "False"}


def test_api_base_and_key_are_passed_only_when_given() -> None:
    seen: list[dict[str, Any]] = []

    def completion(**kwargs: Any) -> Any:
        seen.append(kwargs)
        message = SimpleNamespace(content="hi", tool_calls=None)
        return SimpleNamespace(choices=[SimpleNamespace(message=message)])

    common: dict[str, Any] = {
        "model": "m",
        "messages": [{"role": "user", "content": "x"}],
        "temperature": None,
        "max_tokens": None,
        "completion": completion,
    }
    assert chat_completion(**common) == ChatReply("hi")
    chat_completion(**common, api_base="http://127.0.0.1:1/v1", api_key="k", log_to_callbacks=True)
    assert "api_base" not in seen[0] and "api_key" not in seen[0]
    assert seen[0]["no-log"] is True and seen[0]["drop_params"] is True
    assert seen[1]["api_base"] == "http://127.0.0.1:1/v1" and seen[1]["api_key"] == "k"
    assert "no-log" not in seen[1]


@pytest.mark.parametrize(
    "response",
    [SimpleNamespace(choices=[]), SimpleNamespace(), "not a response"],
    ids=["no choices", "no attribute", "a string"],
)
def test_a_malformed_response_is_a_model_call_error(response: Any) -> None:
    with pytest.raises(ModelCallError, match="no choices"):
        chat_completion(
            model="m",
            messages=[],
            temperature=None,
            max_tokens=None,
            completion=lambda **kwargs: response,
        )


def test_tool_calls_are_parsed(stub_llm: StubLLM) -> None:
    stub_llm.queue({"tool_calls": [("lookup", {"city": "Paris"})], "content": "Checking."})
    reply = chat_completion(
        model="openai/house-model",
        messages=[{"role": "user", "content": "weather?"}],
        temperature=None,
        max_tokens=None,
        api_base=stub_llm.url,
        api_key="sk-test",
    )
    assert reply == ChatReply(
        "Checking.", (ToolCall(id="call_1_0", name="lookup", arguments='{"city": "Paris"}'),)
    )
