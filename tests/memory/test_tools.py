"""Python callables as OpenAI tools: schemas from signatures and docstrings, safe execution."""

from __future__ import annotations

from typing import Any, Literal

import pytest

from governed_memory import ConfigurationError
from governed_memory._memory._llm import ToolCall
from governed_memory._memory._tools import Toolbox, tool_schema


def lookup(
    city: str,
    days: int = 1,
    units: Literal["metric", "imperial"] = "metric",
    tags: list[str] | None = None,
    ratio: float | None = None,
    strict: bool = False,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Look up the weather forecast.

    Longer explanation that is not part of the description.

    Args:
        city: the city name,
            for example Paris.
        days: how many days ahead.
    """
    return {"city": city, "days": days}


def test_schema_from_signature_and_docstring() -> None:
    schema = tool_schema(lookup)
    assert schema["type"] == "function"
    function = schema["function"]
    assert function["name"] == "lookup"
    assert function["description"] == "Look up the weather forecast."
    parameters = function["parameters"]
    assert parameters["required"] == ["city"]
    assert parameters["properties"] == {
        "city": {"type": "string", "description": "the city name, for example Paris."},
        "days": {"type": "integer", "description": "how many days ahead."},
        "units": {"enum": ["metric", "imperial"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "ratio": {"type": "number"},
        "strict": {"type": "boolean"},
        "extra": {"type": "object"},
    }


def test_unsupported_signatures_are_refused() -> None:
    def star(*args: int) -> None:
        """x"""

    def kw(**kwargs: int) -> None:
        """x"""

    for fn in (star, kw):
        with pytest.raises(ConfigurationError, match="no \\*args"):
            tool_schema(fn)
    with pytest.raises(ConfigurationError, match="'<lambda>'"):
        tool_schema(lambda x: x)


def test_duplicate_and_uncallable_tools_are_refused() -> None:
    with pytest.raises(ConfigurationError, match="two tools are named 'lookup'"):
        Toolbox([lookup, lookup])
    with pytest.raises(ConfigurationError, match="not callable"):
        Toolbox(["lookup"])  # type: ignore[list-item]


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ('{"city": "Paris"}', 'lookup returned: {"city": "Paris", "days": 1}'),
        ("not json", "Error: the arguments for lookup are not valid JSON"),
        ("[1]", "Error: the arguments for lookup must be a JSON object"),
        ('{"town": "Paris"}', "Error: lookup raised TypeError"),
        ("", 'lookup returned: {"city"'),
    ],
)
def test_run_turns_every_outcome_into_text(arguments: str, expected: str) -> None:
    toolbox = Toolbox([lookup])
    if arguments == "":
        arguments = '{"city": "Rome", "days": 2}'
    assert toolbox.run(ToolCall(id="1", name="lookup", arguments=arguments)).startswith(expected)
