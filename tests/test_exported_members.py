"""The public surface is exactly what __all__ lists, sorted, and it is imported lazily."""

from __future__ import annotations

import ast
import importlib
import json
import pkgutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import governed_memory

# Packages the default-mode data path must not import: each costs tens of
# milliseconds to seconds (litellm) and only the policy layer or a model call
# needs it.
HEAVY = (
    "apscheduler",
    "cryptography",
    "litellm",
    "opentelemetry",
    "pydantic",
    "pydantic_settings",
    "tiktoken",
)

# Public modules beside the facade's names (``import governed_memory.testing`` binds the
# module on the package, as any submodule import does); everything else is ``_private``.
PUBLIC_MODULES = {"console", "integrations", "testing"}


def _type_checking_imports() -> dict[str, tuple[str, str]]:
    """Public name -> (module, attribute) from the facade's ``if TYPE_CHECKING:`` block."""
    tree = ast.parse(Path(governed_memory.__file__).read_text(encoding="utf-8"))
    blocks = [
        node
        for node in tree.body
        if isinstance(node, ast.If)
        and isinstance(node.test, ast.Name | ast.Attribute)
        and ast.unparse(node.test).endswith("TYPE_CHECKING")
    ]
    assert len(blocks) == 1, "expected one `if TYPE_CHECKING:` block in governed_memory/__init__"
    found: dict[str, tuple[str, str]] = {}
    for node in blocks[0].body:
        assert isinstance(node, ast.ImportFrom) and node.level == 1, ast.unparse(node)
        for alias in node.names:
            found[alias.asname or alias.name] = (f"governed_memory.{node.module}", alias.name)
    return found


def _fresh_python(code: str) -> object:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


def test_all_is_sorted_and_unique() -> None:
    names = governed_memory.__all__
    assert list(names) == sorted(set(names))


def test_the_only_public_modules_are_the_listed_ones() -> None:
    modules = {m.name for m in pkgutil.iter_modules(governed_memory.__path__)}
    assert {name for name in modules if not name.startswith("_")} == PUBLIC_MODULES
    assert not PUBLIC_MODULES & set(governed_memory.__all__)


def test_dir_lists_exactly_the_public_names() -> None:
    public = {name for name in dir(governed_memory) if not name.startswith("_")}
    assert public - PUBLIC_MODULES == set(governed_memory.__all__)


@pytest.mark.parametrize("name", governed_memory.__all__)
def test_every_public_name_resolves(name: str) -> None:
    value = getattr(governed_memory, name)
    assert value is not None
    assert name in vars(governed_memory), "the resolved value is kept on the module"


def test_star_import_binds_every_public_name() -> None:
    namespace: dict[str, object] = {}
    exec("from governed_memory import *", namespace)
    assert set(namespace) - {"__builtins__"} == set(governed_memory.__all__)


def test_type_checkers_see_the_objects_the_runtime_returns() -> None:
    """The ``TYPE_CHECKING`` imports (what mypy reads) name every public object, and the same one."""
    imports = _type_checking_imports()
    assert set(imports) == set(governed_memory.__all__)
    for name, (module, attribute) in imports.items():
        expected = getattr(importlib.import_module(module), attribute)
        assert getattr(governed_memory, name) is expected, name


def test_no_unlisted_public_names_after_everything_resolved() -> None:
    for name in governed_memory.__all__:
        getattr(governed_memory, name)
    public = {name for name in vars(governed_memory) if not name.startswith("_")}
    assert public - PUBLIC_MODULES == set(governed_memory.__all__)


def test_unknown_name_is_an_attribute_error_naming_it() -> None:
    with pytest.raises(AttributeError, match="'NoSuchThing'"):
        _ = governed_memory.NoSuchThing  # type: ignore[attr-defined]
    with pytest.raises(ImportError, match="NoSuchThing"):
        exec("from governed_memory import NoSuchThing", {})


def test_package_import_loads_no_heavy_dependency() -> None:
    loaded = _fresh_python(
        f"""
        import json, sys
        import governed_memory
        print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))
        """
    )
    assert loaded == []


def test_default_mode_conversation_loads_no_heavy_dependency(tmp_path: Path) -> None:
    """Create, add, compact and preload in default mode: the core data path stays light."""
    loaded = _fresh_python(
        f"""
        import json, sys
        from governed_memory import Conversation, memory_md_path
        path = memory_md_path("Light", {str(tmp_path)!r})
        conversation = Conversation(memory_md_path=path, time_enabled=True)
        conversation.add("User", "hello")
        conversation.compact("a summary")
        again = Conversation(memory_md_path=path, preload_max_chars=10_000)
        assert len(again.conversation_history) == 1, again.conversation_history
        print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))
        """
    )
    assert loaded == []
