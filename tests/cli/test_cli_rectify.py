"""``governed-memory rectify`` through the real entry point: list ids, correct, refuse, resume."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from subjects_helpers import conversation, governance, readable_text

from governed_memory import FixedClock, Governance
from governed_memory._records._holds import HoldRegistry

OLD = "alice was born on 1980-01-01 in Lyon."
NEW = "alice was born on 1981-02-02 in Lyon."


def run(workspace: Path, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    from governed_memory._cli import main

    result = CliRunner().invoke(main, ["--workspace", str(workspace), *args], input=stdin)
    return result.exit_code, result.stdout, result.stderr


@pytest.fixture
def gov(workspace: Path, clock: FixedClock) -> Governance:
    gov = governance(workspace, clock)
    conv = conversation(gov, "A")
    conv.add("Human", OLD, subject_id="alice")
    conv.add("Human", "bob private note", subject_id="bob")
    conv.compact(f"[Compressed Memory Summary] alice: {OLD}")
    conv.add("Human", "alice later", subject_id="alice")
    conv.store.close()  # type: ignore[union-attr]
    return gov


def _record_id(workspace: Path) -> str:
    code, out, err = run(workspace, "rectify", "--subject", "alice", "--list", "--json")
    assert code == 0, err
    [found] = [r for r in json.loads(out) if r["content"] == OLD]
    return str(found["id"])


def test_list_shows_the_subjects_records_with_their_ids(gov: Governance) -> None:
    code, out, _ = run(gov.workspace, "rectify", "--subject", "alice", "--list")
    assert code == 0
    assert _record_id(gov.workspace) in out and "archive/history_" in out
    assert "bob private" not in out


def test_rectify_prints_the_receipt_and_corrects_every_copy(gov: Governance) -> None:
    record = _record_id(gov.workspace)
    code, out, err = run(
        gov.workspace, "rectify", "--subject", "alice", "--record", record, "--text", NEW,
        "--reason", "ticket 9",
    )  # fmt: skip
    assert code == 0, err
    assert "1 copies corrected, summaries 1 marked, 0 regenerated" in out
    text = readable_text(gov)
    assert "1980-01-01" not in text and NEW in text


def test_rectify_json_is_the_stored_receipt(gov: Governance) -> None:
    record = _record_id(gov.workspace)
    code, out, _ = run(
        gov.workspace, "rectify", "--subject", "alice", "--record", record, "--text", NEW, "--json"
    )
    assert code == 0
    receipt = json.loads(out)
    assert receipt["kind"] == "rectification" and receipt["record_id"] == record
    assert OLD not in out and NEW not in out  # hashes, never content
    code, out, _ = run(gov.workspace, "rectify", "--receipts", "--json")
    assert code == 0 and json.loads(out) == [receipt]


def test_text_file_and_standard_input_are_read_as_utf8(gov: Governance, tmp_path: Path) -> None:
    record = _record_id(gov.workspace)
    file = tmp_path / "new.txt"
    file.write_text(NEW + "\n", encoding="utf-8")
    code, _, err = run(
        gov.workspace, "rectify", "--subject", "alice", "--record", record, "--text-file", str(file)
    )
    assert code == 0, err
    code, _, err = run(
        gov.workspace, "rectify", "--subject", "alice", "--record", record, "--text-file", "-",
        stdin="alice was born in 1982.",
    )  # fmt: skip
    assert code == 0, err
    assert "alice was born in 1982." in readable_text(gov)


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        (
            ["--record", "rec-0000000000000000", "--text", NEW],
            1,
            "no record 'rec-0000000000000000'",
        ),
        (["--record", "nope", "--text", NEW], 1, "is not a record id"),
        (["--text", NEW], 2, "give --record ID"),
        (["--record", "rec-0000000000000000"], 2, "--text or --text-file"),
    ],
)
def test_bad_input_is_one_line_and_an_exit_status(
    gov: Governance, args: list[str], code: int, message: str
) -> None:
    got, _, err = run(gov.workspace, "rectify", "--subject", "alice", *args)
    assert got == code and message in err and "Traceback" not in err


def test_empty_text_and_another_subjects_record_are_refused(gov: Governance) -> None:
    record = _record_id(gov.workspace)
    code, _, err = run(
        gov.workspace, "rectify", "--subject", "alice", "--record", record, "--text", "  "
    )
    assert code == 1 and "the rectified text is empty" in err
    code, _, err = run(
        gov.workspace, "rectify", "--subject", "bob", "--record", record, "--text", NEW
    )
    assert code == 1 and "is not a record of subject 'bob'" in err


def test_a_hold_refuses_with_the_hold_named(gov: Governance) -> None:
    hold = HoldRegistry(gov.governance_dir, clock=gov.clock).place(
        subject="alice", reason="case 3", actor="legal"
    )
    record = _record_id(gov.workspace)
    code, _, err = run(
        gov.workspace, "rectify", "--subject", "alice", "--record", record, "--text", NEW
    )
    assert code == 1 and hold.id in err and "release" in err
    assert OLD in readable_text(gov)


def test_resume_with_nothing_pending_says_so(gov: Governance) -> None:
    code, out, _ = run(gov.workspace, "rectify", "--resume")
    assert code == 0 and "no interrupted rectification" in out


def test_show_prints_the_record_id_rectify_takes(gov: Governance) -> None:
    code, out, _ = run(gov.workspace, "show", "A", "--subject", "alice", "--archives")
    assert code == 0 and _record_id(gov.workspace) in out
