"""Erasure ids are shown whole and a unique start of one is enough for `erasures show|cancel`."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from governed_memory._cli import main


def _run(workspace: Path, *args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["--workspace", str(workspace), *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result.exit_code, result.output


def _ids(workspace: Path) -> tuple[list[str], list[str]]:
    code, out = _run(workspace, "erasures", "list", "--json")
    assert code == 0
    listing = json.loads(out)
    return [t["id"] for t in listing["erasures"]], [s["id"] for s in listing["scheduled"]]


def _populate(workspace: Path) -> None:
    workspace.mkdir(exist_ok=True)
    for subject in ("s1", "s2"):
        assert _run(workspace, "erase", "--subject", subject, "--yes")[0] == 0
    long_subject = "customer-" + "x" * 80  # a wide scope column squeezes the others
    assert _run(workspace, "erase", "--subject", long_subject, "--grace", "30d")[0] == 0


def test_erasures_list_shows_every_id_whole(workspace: Path) -> None:
    _populate(workspace)
    completed, scheduled = _ids(workspace)
    code, out = _run(workspace, "erasures", "list")
    assert code == 0
    for erasure_id in completed + scheduled:
        assert erasure_id in out


def test_erasures_show_accepts_a_unique_start_of_an_id(workspace: Path) -> None:
    _populate(workspace)
    completed, _ = _ids(workspace)
    target = completed[0]
    other = completed[1]
    prefix = next(target[:n] for n in range(1, len(target)) if not other.startswith(target[:n]))
    code, out = _run(workspace, "erasures", "show", prefix)
    assert code == 0 and f"erasure {target} " in out
    code, out = _run(workspace, "erasures", "show", target[:-3] + "…")  # as a cut table cell
    assert code == 0 and f"erasure {target} " in out


def test_an_ambiguous_start_lists_the_candidates(workspace: Path) -> None:
    _populate(workspace)
    completed, _ = _ids(workspace)
    code, out = _run(workspace, "erasures", "show", "20")
    assert code == 2
    assert "is the start of 2 erasure ids" in out
    assert all(erasure_id in out for erasure_id in completed)


def test_erasures_cancel_accepts_a_unique_start_of_an_id(workspace: Path) -> None:
    _populate(workspace)
    _, scheduled = _ids(workspace)
    code, out = _run(workspace, "erasures", "cancel", scheduled[0][:12])
    assert code == 0 and f"cancelled scheduled erasure {scheduled[0]}" in out
    assert _ids(workspace)[1] == []
