"""The one format-version check: the file, both versions and the likely cause."""

from __future__ import annotations

import pytest

from governed_memory._errors import FormatVersionError
from governed_memory._records import check_version


def test_the_expected_version_returns_the_document() -> None:
    document = {"v": 1, "x": 2}
    assert check_version(document, 1, "file f") is document


@pytest.mark.parametrize("document", [{"v": 0}, {"v": "1"}, {"v": True}, {}, [1], None])
def test_anything_but_a_newer_version_is_called_corrupted(document: object) -> None:
    with pytest.raises(
        FormatVersionError,
        match=r"^file f has format version .*; this release reads version 1\. .*corrupted",
    ):
        check_version(document, 1, "file f")


def test_a_newer_version_names_both_and_the_fix() -> None:
    with pytest.raises(
        FormatVersionError,
        match=r"version 2; this release reads version 1\. .*newer governed_memory: upgrade",
    ):
        check_version({"v": 2}, 1, "file f")
    with pytest.raises(FormatVersionError, match="newer governed_memory: finish it first"):
        check_version({"v": 2}, 1, "file f", fix="finish it first")
