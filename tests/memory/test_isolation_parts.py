"""sort_turns: what a compaction keeps and what it summarises, as a pure function."""

from __future__ import annotations

from governed_memory._format import LINEAGE_KEY, PRELOAD_PREFIX
from governed_memory._memory._isolation import sort_turns

SHARED = {"role": "System", "content": PRELOAD_PREFIX + "shared"}
OWN_PRELOAD = {"role": "System", "content": PRELOAD_PREFIX + "alice's"}
ALICE = {"role": "Human", "content": "a", "subject_id": "alice"}
BOB = {"role": "Human", "content": "b", "subject_id": "bob"}
NOBODY = {"role": "Human", "content": "n"}
MIXED_SUMMARY = {"role": "System", "content": "s", LINEAGE_KEY: ["alice", "bob"]}
TURNS = [SHARED, OWN_PRELOAD, ALICE, BOB, NOBODY, MIXED_SUMMARY]


def test_without_isolation_every_turn_is_summarised() -> None:
    parts = sort_turns(
        TURNS, mine=None, shared_preload=None, preload_subjects={"alice"}, left_out=set()
    )
    assert parts.own == TURNS and not (parts.shared or parts.others or parts.left_out)


def test_under_isolation_the_shared_preload_and_other_subjects_are_kept() -> None:
    parts = sort_turns(
        TURNS, mine={"alice"}, shared_preload=SHARED, preload_subjects={"alice"}, left_out=set()
    )
    assert parts.shared == [SHARED]
    assert parts.own == [OWN_PRELOAD, ALICE, NOBODY]
    assert parts.others == [BOB, MIXED_SUMMARY]  # a summary holding bob is bob's too


def test_left_out_subjects_are_set_apart_without_isolation() -> None:
    parts = sort_turns(
        TURNS, mine=None, shared_preload=None, preload_subjects={"alice"}, left_out={"bob"}
    )
    assert parts.left_out == [BOB, MIXED_SUMMARY]
    assert parts.own == [SHARED, OWN_PRELOAD, ALICE, NOBODY]


def test_a_preload_holding_a_left_out_subject_is_set_apart_whole() -> None:
    parts = sort_turns(
        [OWN_PRELOAD, ALICE],
        mine=None,
        shared_preload=None,
        preload_subjects={"alice", "carol"},
        left_out={"carol"},
    )
    assert parts.left_out == [OWN_PRELOAD] and parts.own == [ALICE]
