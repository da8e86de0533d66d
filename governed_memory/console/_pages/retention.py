"""The retention page (being built: no routes yet)."""

from __future__ import annotations

from starlette.routing import Route

routes: list[Route] = []
