"""Every exception of the package is defined in governed_memory._errors and drawn in its tree."""

from __future__ import annotations

import importlib
import inspect
import pkgutil
import re

import pytest

import governed_memory
from governed_memory import _errors
from governed_memory._errors import ErasureBlockedError, GovernedMemoryError

# One tree line: the drawing's prefix, a class name, then its builtin bases in parentheses.
_LINE = re.compile(r"^(?P<prefix>[ │├└─]*)(?P<name>[A-Z]\w*Error)\b(?: \((?P<builtins>[\w, ]+)\))?")


def _package_exceptions() -> set[type[BaseException]]:
    found: set[type[BaseException]] = set()
    for module_info in pkgutil.walk_packages(governed_memory.__path__, "governed_memory."):
        module = importlib.import_module(module_info.name)
        for value in vars(module).values():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__.startswith("governed_memory")
            ):
                found.add(value)
    return found


def _drawn() -> dict[str, tuple[str | None, set[str]]]:
    """Class name -> (parent drawn above it or None for a root, builtins named in parentheses)."""
    doc = _errors.__doc__
    assert doc is not None
    drawn: dict[str, tuple[str | None, set[str]]] = {}
    path: list[str] = []  # the names on the way down to the current line
    for line in doc.splitlines():
        found = _LINE.match(line[4:] if line.startswith("    ") else "")
        if not found:
            continue
        depth = len(found["prefix"]) // 4
        del path[depth:]
        builtins = {b.strip() for b in (found["builtins"] or "").split(",") if b.strip()}
        drawn[found["name"]] = (path[-1] if path else None, builtins)
        path.append(found["name"])
    return drawn


# The console's refusals inside a request: Starlette flow control, never seen by a caller
# (the _errors docstring says so).
REQUEST_SIGNALS = {
    "governed_memory.console._auth.NotSignedIn",
    "governed_memory.console._auth.Forbidden",
    "governed_memory.console._auth._csrf.CsrfRefusal",
    "governed_memory.console._auth._oidc.OidcRefusal",
}


def test_every_exception_class_is_defined_in_the_errors_module() -> None:
    elsewhere = sorted(
        f"{cls.__module__}.{cls.__qualname__}"
        for cls in _package_exceptions()
        if cls.__module__ != "governed_memory._errors"
    )
    assert sorted(set(elsewhere) - REQUEST_SIGNALS) == []


def test_the_request_signals_are_no_library_errors() -> None:
    """A console refusal is not a GovernedMemoryError, so no library caller can catch one."""
    signals = {f"{c.__module__}.{c.__qualname__}": c for c in _package_exceptions()}
    for name in REQUEST_SIGNALS:
        assert not issubclass(signals[name], GovernedMemoryError), name


def test_the_tree_draws_every_exception_under_its_bases() -> None:
    defined = {
        name: value
        for name, value in vars(_errors).items()
        if inspect.isclass(value) and issubclass(value, BaseException)
    }
    drawn = _drawn()
    assert set(drawn) == set(defined)
    for name, (parent, builtins) in drawn.items():
        bases = defined[name].__bases__
        own = {b.__name__ for b in bases if b.__module__ == "governed_memory._errors"}
        foreign = {b.__name__ for b in bases if b.__module__ == "builtins"} - {"Exception"}
        assert own == ({parent} if parent else set()), name
        assert foreign == builtins, name


def test_all_lists_every_exception_and_the_hold_protocol() -> None:
    exceptions = {
        name
        for name, value in vars(_errors).items()
        if inspect.isclass(value) and issubclass(value, BaseException)
    }
    assert set(_errors.__all__) == exceptions | {"HoldLike"}
    assert _errors.__all__ == sorted(_errors.__all__)


@pytest.mark.parametrize(
    "old_home",
    [
        "governed_memory._policy",
        "governed_memory._records",
        "governed_memory._retention",
        "governed_memory._subjects",
    ],
)
def test_the_old_homes_still_export_the_same_classes(old_home: str) -> None:
    module = importlib.import_module(old_home)
    moved = [name for name in module.__all__ if name.endswith("Error")]
    assert moved
    for name in moved:
        assert getattr(module, name) is getattr(_errors, name), name


def test_public_errors_are_rooted_at_governed_memory_error() -> None:
    public = [
        getattr(governed_memory, name) for name in governed_memory.__all__ if name.endswith("Error")
    ]
    assert public and all(issubclass(cls, GovernedMemoryError) for cls in public)


def test_erasure_blocked_names_each_hold_from_any_hold_like_value() -> None:
    from governed_memory import Hold

    hold = Hold(
        id="hold-1",
        reason="litigation",
        placed_by="legal",
        placed_at="2026-01-01T00:00:00+00:00",
        subject="alice",
    )
    error = ErasureBlockedError("subject 'alice'", [hold])
    assert error.holds == (hold,)
    assert "hold 'hold-1' on subject 'alice' placed by 'legal'" in str(error)
    assert "governed-memory hold release" in str(error)
    assert isinstance(error, PermissionError)
