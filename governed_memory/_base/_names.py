"""Rules for agent names, which become folder names inside the workspace.

The reference joins ``agent_name`` into the path unchecked (defect D1), so
``../x`` or an absolute path writes outside the workspace. Here a name is one
path component or it is refused.
"""

from __future__ import annotations

from .._errors import InvalidAgentNameError

__all__ = ["MAX_NAME_BYTES", "validate_agent_name"]

MAX_NAME_BYTES = 255
_FIX = "use one folder name made of letters, digits, '-', '_' or '.'"


def validate_agent_name(agent_name: object) -> str:
    """Return ``agent_name`` if it is safe as a single folder name.

    Raises:
        InvalidAgentNameError: naming the value and the rule it breaks.
    """
    if not isinstance(agent_name, str):
        raise InvalidAgentNameError(
            f"agent_name {agent_name!r} is a {type(agent_name).__name__}, not a string; {_FIX}"
        )
    rule: str | None = None
    if agent_name == "":
        rule = "is empty"
    elif "\x00" in agent_name:
        rule = "contains a NUL character"
    elif agent_name.startswith(("/", "\\")):
        rule = "is an absolute path"
    elif "/" in agent_name or "\\" in agent_name:
        rule = "contains a path separator"
    elif agent_name in (".", ".."):
        rule = "is a relative path component ('.' or '..')"
    elif any(0xD800 <= ord(ch) <= 0xDFFF for ch in agent_name):
        rule = "contains a lone surrogate (text decoded with errors='surrogateescape')"
    elif len(agent_name.encode("utf-8")) > MAX_NAME_BYTES:
        size = len(agent_name.encode("utf-8"))
        rule = f"is {size} bytes long, over the {MAX_NAME_BYTES}-byte limit of a folder name"
    elif any(ord(ch) < 0x20 or ord(ch) == 0x7F for ch in agent_name):
        # A line break would also end the header line it is written into.
        rule = "contains a control character (line break, tab, escape, ...)"
    elif agent_name != agent_name.strip():
        rule = "has leading or trailing whitespace"
    if rule is not None:
        raise InvalidAgentNameError(f"agent_name {agent_name!r} {rule}; {_FIX}")
    return agent_name
