"""The public surface is exactly what __all__ lists, sorted."""

from __future__ import annotations

import governed_memory


def test_all_is_sorted_and_exported() -> None:
    names = governed_memory.__all__
    assert list(names) == sorted(names)
    for name in names:
        assert hasattr(governed_memory, name), name


def test_no_unlisted_public_names() -> None:
    public = {n for n in vars(governed_memory) if not n.startswith("_") and n != "annotations"}
    assert public == set(governed_memory.__all__)
