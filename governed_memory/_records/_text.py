"""The one check that text given to a record can be stored: UTF-8 without NUL or lone surrogates.

Every record is UTF-8 JSON. A Python ``str`` can hold a lone surrogate
(``"\\udc80"``, what ``os.fsdecode`` makes of an undecodable byte) that no
UTF-8 encoder accepts; left unchecked it raises ``UnicodeEncodeError`` deep
inside a writer, after part of the request ran. A NUL cuts the value short in
C tools reading the file. Both are refused at the public entry points with a
:class:`~governed_memory.ConfigurationError` naming the value, the rule and the fix.
"""

from __future__ import annotations

import re

from .._errors import ConfigurationError

__all__ = ["RULE", "required_text", "validate_text"]

RULE = "must be UTF-8 text without NUL or lone surrogates"
_SHOWN = 80  # characters of the value a message quotes
_MAX_TEXT = 2000
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def validate_text(name: str, value: str, *, fix: str, nul: bool = True) -> str:
    """Return ``value`` if it encodes as UTF-8 and holds no NUL.

    Args:
        name: how the message names the value (``subject_id``, ``actor``, ``reason``).
        value: the text to check (not a str: returned as is, the caller's own check applies).
        fix: what to give instead, e.g. ``"use a stable pseudonymous identifier"``.
        nul: refuse a NUL here; False when the caller refuses it itself
            (with every other control character, in its own words).

    Raises:
        ConfigurationError: a lone surrogate or a NUL, naming the value (repr),
            the position, the rule and the fix.
    """
    if not isinstance(value, str):
        return value
    shown = repr(value if len(value) <= _SHOWN else value[:_SHOWN] + "…")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ConfigurationError(
            f"{name} {shown} holds a lone surrogate ({value[exc.start]!r} at position "
            f"{exc.start}); it {RULE}; {fix} (text read as bytes: decode it as UTF-8)"
        ) from None
    if nul and "\x00" in value:
        raise ConfigurationError(
            f"{name} {shown} holds a NUL character (at position {value.index(chr(0))}); "
            f"it {RULE}; {fix}"
        )
    return value


def required_text(name: str, value: object, *, example: str) -> str:
    """``value`` stripped, if it is a non-empty single-line text a record can hold (a reason, an actor).

    Raises:
        ConfigurationError: not text, blank, over 2000 characters, or holding a
            control character, a NUL or a lone surrogate (naming it, the rule and
            ``example``).
    """
    if isinstance(value, str):
        validate_text(name, value, fix=f"give text such as {example!r}", nul=False)
    if not isinstance(value, str) or not value.strip():
        raise ConfigurationError(f"{name} {value!r} must be a non-empty text, e.g. {example!r}")
    if len(value) > _MAX_TEXT or _CONTROL.search(value):
        raise ConfigurationError(
            f"{name} {value[:40]!r}... must be at most {_MAX_TEXT} characters without "
            "control characters"
        )
    return value.strip()
