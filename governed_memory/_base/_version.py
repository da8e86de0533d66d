"""The package version, in one place below every layer (spans carry it as the instrumentation version)."""

from __future__ import annotations

__all__ = ["VERSION"]

VERSION = "0.1.0"
