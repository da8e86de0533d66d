"""What a default-mode Conversation can reach: no governance, operations, records, policy or crypto.

lint-imports (pyproject.toml) states the layer rules; these tests state their
purpose for the data path. grimp (import-linter's graph builder) sees every
import, those inside functions included.
"""

from __future__ import annotations

import grimp
import pytest

CONVERSATION = "governed_memory._memory._conversation"

# The layers a Conversation reaches only through the ConsentGate it is given.
GOVERNED = (
    "_audit",
    "_crypto",
    "_governance",
    "_keys",
    "_policy",
    "_records",
    "_retention",
    "_subjects",
)


def _reached(*, type_checking: bool) -> set[str]:
    graph = grimp.build_graph(
        "governed_memory", exclude_type_checking_imports=not type_checking, cache_dir=None
    )
    return set(graph.find_upstream_modules(CONVERSATION))


def _in(reached: set[str], layers: tuple[str, ...]) -> list[str]:
    prefixes = tuple(f"governed_memory.{layer}" for layer in layers)
    return sorted(
        m for m in reached if m in prefixes or m.startswith(tuple(p + "." for p in prefixes))
    )


@pytest.fixture(scope="module")
def runtime_reach() -> set[str]:
    """The modules importing the Conversation module can load (type-checking blocks never run)."""
    return _reached(type_checking=False)


def test_conversation_module_can_load_no_governed_layer(runtime_reach: set[str]) -> None:
    assert _in(runtime_reach, GOVERNED) == []


def test_conversation_module_loads_at_most_the_data_path(runtime_reach: set[str]) -> None:
    """Errors, base, format, protocols, stores, the module's own erasure filter and isolation helpers.

    15 modules: the subject-isolation helpers (``_memory._isolation``) moved out
    of the Conversation module into one of their own, so it stays readable.
    """
    layers = {m.split(".")[1] for m in runtime_reach}
    assert layers <= {"_base", "_errors", "_format", "_memory", "_protocols", "_stores"}
    assert len(runtime_reach) <= 15


def test_conversation_module_names_no_governed_layer_even_for_type_checking() -> None:
    """Type-level imports included; the stores package's lazy interface names the encrypted store."""
    assert _in(_reached(type_checking=True), tuple(x for x in GOVERNED if x != "_crypto")) == []
