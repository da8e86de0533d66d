"""Session items as MEMORY.md records: one item, one record, its JSON as the content.

Pure functions, no I/O. An item is the JSON object the SDK hands
``add_items`` (a ``TResponseInputItem``); it is stored as compact JSON on
one line, so it never needs the format's escaping (it starts with ``{``) and
reads back equal, key order included. The record's role is the item's
``role`` (``user``, ``assistant``) or ``type`` (``function_call``, ...) when
that is a plain word, else ``item``: it makes MEMORY.md and exports
readable, and reading checks it, so that a record of another writer whose
text merely looks like an item is not taken for one.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from ..._errors import ConfigurationError
from ..._format import Record, render_block

__all__ = ["ITEM_ROLE", "decode_item", "item_role", "render_items"]

ITEM_ROLE = "item"
_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_.-]{0,63}")


def item_role(item: dict[str, Any]) -> str:
    """The role its record is written under: the item's ``role`` or ``type``, else ``item``."""
    for key in ("role", "type"):
        value = item.get(key)
        if isinstance(value, str) and _WORD.fullmatch(value):
            return value
    return ITEM_ROLE


def encode_item(item: object, *, index: int, session_id: str) -> str:
    """The item as one line of JSON (``ensure_ascii`` only when the text has a lone surrogate).

    Raises:
        ConfigurationError: the item is not a dict, or not JSON (naming which and the fix).
    """
    where = f"add_items() item {index} of session {session_id!r}"
    if not isinstance(item, dict):
        raise ConfigurationError(
            f"{where} is a {type(item).__name__}, not a dict; pass the SDK's input items "
            "(TResponseInputItem dicts such as {'role': 'user', 'content': 'hi'}), e.g. "
            "from RunResult.to_input_list()"
        )
    _check_keys(item, where)
    try:
        text = json.dumps(item, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError, RecursionError) as exc:
        raise ConfigurationError(
            f"{where} cannot be stored as JSON ({exc}); convert its values to JSON types "
            "(str, int, float, bool, None, list, dict) first"
        ) from exc
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate: escaped as \udxxx it reads back as the same string.
        text = json.dumps(item, ensure_ascii=True, separators=(",", ":"))
    return text


def _check_keys(item: dict[Any, Any], where: str) -> None:
    """Refuse a key that is not a string: JSON would turn it into one (1 and "1" would collide).

    Iterative, so that an item nested deeper than the recursion limit gets
    json's own error rather than a RecursionError from here.
    """
    stack: list[tuple[object, str]] = [(item, "")]
    while stack:
        value, path = stack.pop()
        if isinstance(value, dict):
            for key, child in value.items():
                if not isinstance(key, str):
                    raise ConfigurationError(
                        f"{where} has the key {key!r} ({type(key).__name__}) at "
                        f"{path or 'the top'}; JSON keys are strings, so it would read back "
                        "as a string (colliding with a key of that text); use str keys "
                        "(nothing of this add_items was written)"
                    )
                stack.append((child, f"{path}[{key!r}]"))
        elif isinstance(value, (list, tuple)):
            stack.extend((child, f"{path}[{i}]") for i, child in enumerate(value))


def render_items(
    items: Sequence[object], *, session_id: str, timestamp: str, subject_id: str | None
) -> tuple[list[str], str]:
    """(each item's JSON, the blocks of all of them as one string, appended in one write).

    Raises:
        ConfigurationError: an item is not a JSON object (nothing is rendered).
    """
    meta = {"subject": subject_id} if subject_id is not None else None
    texts, blocks = [], []
    for index, item in enumerate(items):
        text = encode_item(item, index=index, session_id=session_id)
        assert isinstance(item, dict)  # encode_item checked it
        texts.append(text)
        blocks.append(render_block(item_role(item), timestamp, text, meta))
    return texts, "".join(blocks)


def decode_item(record: Record) -> dict[str, Any] | None:
    """The item a record holds; None when it holds none (a record not written by a session).

    A record holds an item only under the role a session writes that item
    under: a Conversation on the same agent whose user typed
    ``{"role": "system", ...}`` wrote a ``User`` record, which stays that
    user's text and never becomes a system item.
    """
    content = record.content
    if not content.startswith("{"):
        return None
    try:
        value = json.loads(content)
    except (ValueError, RecursionError):
        return None
    if not isinstance(value, dict) or item_role(value) != record.role:
        return None
    return value
