"""Record ids: stable while a record is moved, encrypted or corrected; distinct otherwise."""

from __future__ import annotations

from governed_memory._format import parse_memory, record_ids, render_block, render_header

HEADER = render_header("A_conv", "2026-11-30T10:00:00")


def _block(
    text: str, subject: str | None = "alice", when: str = "2026-11-30T10:00:00.000001"
) -> str:
    return render_block("Human", when, text, {"subject": subject} if subject else None)


def _ids(text: str, agent: str = "A") -> list[str | None]:
    return record_ids(agent, parse_memory(text).records)


def test_an_id_does_not_depend_on_the_content_or_the_file() -> None:
    first = _ids(HEADER + _block("old text"))
    corrected = _ids(HEADER + _block("new text"))
    archived = _ids(
        "# another header\n\n" + _block("bob", "bob", "2026-11-30T09:00:00") + _block("old text")
    )
    assert first == corrected == archived[1:]
    assert first[0] is not None and first[0].startswith("rec-") and len(first[0]) == 20


def test_records_of_one_microsecond_differ_by_their_order_and_others_do_not_shift_them() -> None:
    two = _ids(HEADER + _block("one") + _block("two"))
    assert two[0] != two[1]
    with_bob = _ids(HEADER + _block("one") + _block("bob", "bob") + _block("two"))
    assert [with_bob[0], with_bob[2]] == two  # erasing bob would not change alice's ids


def test_the_agent_subject_and_role_are_part_of_the_id() -> None:
    base = _ids(HEADER + _block("x"))
    assert _ids(HEADER + _block("x"), agent="B") != base
    assert _ids(HEADER + _block("x", "bob")) != base
    assert (
        record_ids(
            "A", parse_memory(HEADER + render_block("AI", "t", "x", {"subject": "alice"})).records
        )
        != base
    )


def test_records_without_a_subject_have_no_id() -> None:
    assert _ids(HEADER + _block("x", None)) == [None]
