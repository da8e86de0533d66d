"""Lazy re-exports for package interfaces (PEP 562).

A sub-package's ``__init__`` names what other layers may use. Importing the
modules behind those names eagerly would load cryptography, pydantic or
OpenTelemetry for a default-mode ``Conversation`` that needs none of them, so
an interface maps each name to the module defining it and imports that module
on first access.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping

__all__ = ["lazy_attributes"]


def lazy_attributes(package: str, exports: Mapping[str, str]) -> Callable[[str], object]:
    """Return a module ``__getattr__`` resolving ``exports`` (name -> relative module) lazily.

    Args:
        package: the package's ``__name__``.
        exports: each exported name and the module defining it, relative to
            ``package`` (``"._keyring"``).
    """

    def __getattr__(name: str) -> object:
        try:
            module = exports[name]
        except KeyError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)  # later lookups skip __getattr__
        return value

    return __getattr__
