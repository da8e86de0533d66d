"""Memory commands: ``demo``, ``agents``, ``show`` (filled in by the memory-core work)."""

from __future__ import annotations

import click

__all__ = ["commands"]

commands: list[click.Command] = []
