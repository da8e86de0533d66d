"""Agent names become one folder under <workspace>/agents/ or are refused (fixes D1)."""

from __future__ import annotations

import pytest

from governed_memory import ConfigurationError, GovernedMemoryError, InvalidAgentNameError
from governed_memory._base._names import MAX_NAME_BYTES, validate_agent_name


@pytest.mark.parametrize(
    "name",
    [
        "QuantAgent",
        "agent-1_v2.0",
        "...",  # three dots is an ordinary folder name
        ".hidden",
        "Agent with spaces",
        "日本語エージェント",
        "a" * MAX_NAME_BYTES,
        "é" * (MAX_NAME_BYTES // 2),  # 2 bytes each: 254 bytes
    ],
)
def test_valid_names_are_returned_unchanged(name: str) -> None:
    assert validate_agent_name(name) == name


@pytest.mark.parametrize(
    ("name", "rule"),
    [
        pytest.param("", "is empty", id="empty"),
        pytest.param("a\x00b", "NUL", id="nul"),
        pytest.param("/etc", "absolute path", id="absolute"),
        pytest.param("\\\\server\\share", "absolute path", id="absolute-backslash"),
        pytest.param("../x", "path separator", id="parent-escape"),
        pytest.param("a/b", "path separator", id="slash"),
        pytest.param("a\\b", "path separator", id="backslash"),
        pytest.param(".", "relative path component", id="dot"),
        pytest.param("..", "relative path component", id="dotdot"),
        pytest.param("a" * (MAX_NAME_BYTES + 1), "256 bytes long", id="too-long"),
        pytest.param("é" * 128, "256 bytes long", id="too-long-multibyte"),
        pytest.param("a\nb", "control character", id="newline"),
        pytest.param("a\rb", "control character", id="carriage-return"),
        pytest.param("a\tb", "control character", id="tab"),
        pytest.param("a\x1b[31m", "control character", id="escape"),
        pytest.param("a\x7f", "control character", id="delete"),
        pytest.param(" agent", "whitespace", id="leading-space"),
        pytest.param("agent ", "whitespace", id="trailing-space"),
        pytest.param("a\udc80", "lone surrogate", id="surrogate"),
    ],
)
def test_invalid_names_raise_an_error_naming_value_and_rule(name: str, rule: str) -> None:
    with pytest.raises(InvalidAgentNameError) as info:
        validate_agent_name(name)
    message = str(info.value)
    assert rule in message
    assert repr(name) in message
    assert "use one folder name" in message  # the fix


def test_non_string_names_are_refused() -> None:
    with pytest.raises(InvalidAgentNameError, match="is a int, not a string"):
        validate_agent_name(42)


def test_name_error_is_a_value_error_and_a_governed_memory_error() -> None:
    with pytest.raises(ValueError):
        validate_agent_name("..")
    with pytest.raises(ConfigurationError):
        validate_agent_name("..")
    with pytest.raises(GovernedMemoryError):
        validate_agent_name("..")
