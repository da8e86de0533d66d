"""Python callables exposed to the model as OpenAI function tools.

The schema is built from the signature and the docstring: parameter types
from annotations (``str``, ``int``, ``float``, ``bool``, ``list[...]``,
``dict``, ``Literal[...]``, ``X | None``; anything else is described as a
string), the description from the first docstring paragraph and parameter
descriptions from a Google-style ``Args:`` section. A tool's result is
recorded as text under the ``Tool Executor`` role; an exception becomes an
error text the model can react to, it does not stop the agent.
"""

from __future__ import annotations

import inspect
import json
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .._errors import ConfigurationError
from ._llm import ToolCall

__all__ = ["Toolbox", "tool_schema"]

_NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_SIMPLE: Mapping[Any, str] = {str: "string", int: "integer", float: "number", bool: "boolean"}


def _json_type(annotation: Any) -> dict[str, Any]:
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if annotation in _SIMPLE:
        return {"type": _SIMPLE[annotation]}
    if origin is typing.Literal:
        return {"enum": list(args)}
    if origin in (typing.Union, types.UnionType):
        rest = [a for a in args if a is not type(None)]
        return _json_type(rest[0]) if len(rest) == 1 else {}
    if annotation in (list, tuple, set) or origin in (list, tuple, set, Sequence):
        schema: dict[str, Any] = {"type": "array"}
        if args and origin is not tuple:
            schema["items"] = _json_type(args[0])
        return schema
    if annotation is dict or origin in (dict, Mapping):
        return {"type": "object"}
    return {"type": "string"}


def _doc_parts(fn: Callable[..., Any]) -> tuple[str, dict[str, str]]:
    doc = inspect.getdoc(fn) or ""
    summary = doc.split("\n\n", 1)[0].replace("\n", " ").strip()
    params: dict[str, str] = {}
    match = re.search(r"^Args:\n((?:[ \t]+.*\n?|\n)*)", doc, re.MULTILINE)
    if match:
        current = None
        for line in match.group(1).splitlines():
            item = re.match(r"^\s+(\w+)(?:\s*\([^)]*\))?:\s*(.*)$", line)
            if item and (current is None or len(line) - len(line.lstrip()) <= 4):
                current = item.group(1)
                params[current] = item.group(2).strip()
            elif current and line.strip():
                params[current] += " " + line.strip()
    return summary, params


def tool_schema(fn: Callable[..., Any]) -> dict[str, Any]:
    """The OpenAI ``tools`` entry describing ``fn``.

    Raises:
        ConfigurationError: the name is not a valid tool name, or ``fn``
            takes ``*args``/``**kwargs`` or positional-only parameters.
    """
    name = getattr(fn, "__name__", "")
    if not _NAME_RE.match(name):
        raise ConfigurationError(
            f"tool {fn!r} has the name {name!r}; tool names are 1-64 letters, digits, '_' or '-'. "
            "Wrap it in a def with such a name"
        )
    try:
        hints = typing.get_type_hints(fn)
    except Exception:  # unresolvable forward references: describe as strings
        hints = {}
    summary, descriptions = _doc_parts(fn)
    properties: dict[str, Any] = {}
    required: list[str] = []
    for param in inspect.signature(fn).parameters.values():
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD, param.POSITIONAL_ONLY):
            raise ConfigurationError(
                f"tool {name!r} takes {param}; tools need named parameters the model can fill "
                "in (no *args, **kwargs or positional-only parameters)"
            )
        prop = _json_type(hints.get(param.name, str))
        if param.name in descriptions:
            prop["description"] = descriptions[param.name]
        properties[param.name] = prop
        if param.default is param.empty:
            required.append(param.name)
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": summary or f"The Python function {name}.",
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


class Toolbox:
    """The tools of one agent: their schemas and how to run a call.

    Raises:
        ConfigurationError: a tool is not callable, has an invalid name or
            signature, or two tools share a name.
    """

    def __init__(self, tools: Sequence[Callable[..., Any]]) -> None:
        self._tools: dict[str, Callable[..., Any]] = {}
        self.schemas: list[dict[str, Any]] = []
        for fn in tools:
            if not callable(fn):
                raise ConfigurationError(f"tool {fn!r} is not callable; pass functions")
            schema = tool_schema(fn)
            name = schema["function"]["name"]
            if name in self._tools:
                raise ConfigurationError(
                    f"two tools are named {name!r}; tool names must be unique, rename one"
                )
            self._tools[name] = fn
            self.schemas.append(schema)

    def __bool__(self) -> bool:
        return bool(self._tools)

    def run(self, call: ToolCall) -> str:
        """Run one call and return what is recorded under ``Tool Executor``."""
        fn = self._tools.get(call.name)
        if fn is None:
            return f"Error: there is no tool named {call.name!r}; available: {sorted(self._tools)}"
        try:
            arguments = json.loads(call.arguments or "{}")
        except ValueError as exc:
            return f"Error: the arguments for {call.name} are not valid JSON ({exc}): {call.arguments!r}"
        if not isinstance(arguments, dict):
            return f"Error: the arguments for {call.name} must be a JSON object, got {call.arguments!r}"
        try:
            result = fn(**arguments)
        except Exception as exc:
            return f"Error: {call.name} raised {type(exc).__name__}: {exc}"
        if isinstance(result, str):
            text = result
        else:
            try:
                text = json.dumps(result, ensure_ascii=False, default=str)
            except (TypeError, ValueError):
                text = str(result)
        return f"{call.name} returned: {text}"
