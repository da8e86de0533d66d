"""The pure retention planner: each rule, its boundaries, holds and as-of (no disk)."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from governed_memory import Policy
from governed_memory._base._artefacts import ArtefactKind
from governed_memory._records._holds import Hold, HoldSet
from governed_memory._retention import AgentState, Artefact, Rule, WorkspaceState, plan

T0 = dt.datetime(2026, 1, 1, 12, 0, 0)
DAY = dt.timedelta(days=1)


def policy(**retention: object) -> Policy:
    audit = any(key.startswith("audit_") for key in retention)  # needs an audit log to govern
    return Policy.model_validate({"retention": retention, "audit": {"enabled": audit}})


def archive(
    agent: str, when: dt.datetime, *, named: bool = True, subjects: frozenset[str] | None = None
) -> Artefact:
    stamp = when.strftime("%Y-%m-%d_%H-%M-%S")
    return Artefact(
        ArtefactKind.ARCHIVE,
        f"agents/{agent}/archive/history_{stamp}.md",
        100,
        mtime=when if not named else when + dt.timedelta(days=400),  # name wins over mtime
        named_at=when if named else None,
        agent=agent,
        subjects=subjects,
    )


def memory(agent: str, written: dt.datetime, subjects: frozenset[str] | None = None) -> Artefact:
    return Artefact(
        ArtefactKind.MEMORY,
        f"agents/{agent}/MEMORY.md",
        50,
        written,
        agent=agent,
        subjects=subjects,
    )


def other(kind: ArtefactKind, name: str, when: dt.datetime, **kw: object) -> Artefact:
    return Artefact(kind, f".governed_memory/{name}", 10, when, **kw)  # type: ignore[arg-type]


def state(*agents: AgentState, others: tuple[Artefact, ...] = (), holds: HoldSet | None = None):
    return WorkspaceState(agents=agents, others=others, holds=holds or HoldSet())


def paths(result) -> list[str]:
    return [i.artefact.path for i in result.deletions]


def test_default_policy_deletes_nothing() -> None:
    """The reference keeps raw chat logs forever; so does the default policy."""
    s = state(AgentState("a", (memory("a", T0),), (archive("a", T0),)))
    result = plan(s, Policy(), T0 + dt.timedelta(days=10_000))
    assert result.items == ()


def test_archives_max_age_day_29_keeps_day_31_deletes() -> None:
    s = state(AgentState("a", (), (archive("a", T0),)))
    rules = policy(archives_max_age="30d")
    assert plan(s, rules, T0 + 29 * DAY).items == ()
    result = plan(s, rules, T0 + 31 * DAY)
    assert [i.rule for i in result.deletions] == [Rule.ARCHIVES_MAX_AGE]
    assert "over 30d" in result.deletions[0].detail


def test_age_boundary_is_strict() -> None:
    """Exactly the maximum age is kept; one second more is deleted."""
    s = state(AgentState("a", (), (archive("a", T0),)))
    rules = policy(archives_max_age="30d")
    assert plan(s, rules, T0 + 30 * DAY).items == ()
    assert len(plan(s, rules, T0 + 30 * DAY + dt.timedelta(seconds=1)).deletions) == 1


def test_archive_age_prefers_the_name_over_the_mtime() -> None:
    """A restored backup has a fresh mtime but its archive name keeps the real time."""
    named = archive("a", T0)  # mtime 400 days after the name
    assert named.when == T0
    result = plan(
        state(AgentState("a", (), (named,))), policy(archives_max_age="30d"), T0 + 31 * DAY
    )
    assert len(result.deletions) == 1


def test_archive_without_a_valid_name_time_falls_back_to_mtime() -> None:
    unnamed = archive("a", T0, named=False)
    assert unnamed.when == unnamed.mtime
    rules = policy(archives_max_age="30d")
    s = state(AgentState("a", (), (unnamed,)))
    assert plan(s, rules, T0 + 29 * DAY).items == ()
    assert len(plan(s, rules, T0 + 31 * DAY).deletions) == 1


def test_archives_max_count_keeps_the_newest_per_agent() -> None:
    a = [archive("a", T0 + i * DAY) for i in range(5)]
    b = [archive("b", T0 + i * DAY) for i in range(2)]
    s = state(AgentState("a", (), tuple(a)), AgentState("b", (), tuple(b)))
    result = plan(s, policy(archives_max_count=2), T0 + 10 * DAY)
    assert sorted(paths(result)) == sorted(x.path for x in a[:3])
    assert {i.rule for i in result.deletions} == {Rule.ARCHIVES_MAX_COUNT}


def test_age_rule_is_named_before_count_rule() -> None:
    a = [archive("a", T0 + i * DAY) for i in range(4)]
    result = plan(
        state(AgentState("a", (), tuple(a))),
        policy(archives_max_age="30d", archives_max_count=3),
        T0 + 32 * DAY,
    )
    rules = {i.artefact.path: i.rule for i in result.deletions}
    assert rules[a[0].path] is Rule.ARCHIVES_MAX_AGE  # 32 days old: both rules, age named
    assert rules[a[1].path] is Rule.ARCHIVES_MAX_AGE  # 31 days old
    assert a[2].path not in rules and a[3].path not in rules


def test_idle_memory_is_deleted_only_after_the_idle_age() -> None:
    s = state(AgentState("a", (memory("a", T0),), ()))
    rules = policy(idle_memory_max_age="90d")
    assert plan(s, rules, T0 + 89 * DAY).items == ()
    result = plan(s, rules, T0 + 91 * DAY)
    assert [(i.rule, i.artefact.path) for i in result.deletions] == [
        (Rule.IDLE_MEMORY_MAX_AGE, "agents/a/MEMORY.md")
    ]


@pytest.mark.parametrize(
    ("kind", "key", "rule"),
    [
        (ArtefactKind.EXPORT, "exports_max_age", Rule.EXPORTS_MAX_AGE),
        (ArtefactKind.TOMBSTONE, "tombstones_max_age", Rule.TOMBSTONES_MAX_AGE),
        (ArtefactKind.CONSENT, "consent_records_max_age", Rule.CONSENT_RECORDS_MAX_AGE),
        (ArtefactKind.AUDIT, "audit_max_age", Rule.AUDIT_MAX_AGE),
    ],
)
def test_governance_artefacts_follow_their_own_rule(
    kind: ArtefactKind, key: str, rule: Rule
) -> None:
    s = state(others=(other(kind, "x", T0),))
    rules = policy(**{key: "30d"})
    assert plan(s, rules, T0 + 29 * DAY).items == ()
    result = plan(s, rules, T0 + 31 * DAY)
    assert [i.rule for i in result.deletions] == [rule]


@pytest.mark.parametrize("kind", [ArtefactKind.CONSENT, ArtefactKind.TOMBSTONE, ArtefactKind.AUDIT])
def test_current_artefacts_are_never_deleted_by_age(kind: ArtefactKind) -> None:
    """The latest consent grant, a pending erasure's tombstone, the live audit segment."""
    s = state(others=(other(kind, "x", T0, current=True),))
    rules = policy(consent_records_max_age="1d", tombstones_max_age="1d", audit_max_age="1d")
    assert plan(s, rules, T0 + 1000 * DAY).items == ()


def test_audit_segments_are_never_deleted_before_the_minimum_age() -> None:
    """Validation forbids max < min; the planner enforces the minimum anyway."""
    rules = policy(audit_min_age="6y", audit_max_age="7y")
    s = state(others=(other(ArtefactKind.AUDIT, "audit/a.jsonl", T0),))
    assert plan(s, rules, T0 + 6 * 365 * DAY + DAY).items == ()
    assert len(plan(s, rules, T0 + 7 * 365 * DAY + DAY).deletions) == 1


def test_agent_hold_keeps_everything_in_the_folder() -> None:
    holds = HoldSet.of([Hold("h1", "case", "legal", "t", agent="a")])
    s = state(
        AgentState("a", (memory("a", T0),), (archive("a", T0),)),
        AgentState("b", (), (archive("b", T0),)),
        holds=holds,
    )
    result = plan(s, policy(archives_max_age="30d", idle_memory_max_age="30d"), T0 + 60 * DAY)
    assert paths(result) == [archive("b", T0).path]
    assert {i.artefact.path for i in result.held} == {
        "agents/a/MEMORY.md",
        archive("a", T0).path,
    }
    assert all(i.held_by == ("h1",) for i in result.held)


def test_subject_hold_keeps_only_files_with_that_subjects_records() -> None:
    holds = HoldSet.of([Hold("h2", "case", "legal", "t", subject="alice")])
    mine = archive("a", T0, subjects=frozenset({"alice", "bob"}))
    theirs = archive("a", T0 + DAY, subjects=frozenset({"bob"}))
    nobody = archive("b", T0, subjects=frozenset())
    s = state(AgentState("a", (), (mine, theirs)), AgentState("b", (), (nobody,)), holds=holds)
    result = plan(s, policy(archives_max_age="30d"), T0 + 60 * DAY)
    assert sorted(paths(result)) == sorted([theirs.path, nobody.path])
    assert [(i.artefact.path, i.held_by) for i in result.held] == [(mine.path, ("h2",))]


def test_subject_hold_keeps_files_whose_subjects_are_unknown() -> None:
    """An encrypted archive nobody could read may hold the subject's records: keep it."""
    holds = HoldSet.of([Hold("h3", "case", "legal", "t", subject="alice")])
    unknown = archive("a", T0, subjects=None)
    result = plan(
        state(AgentState("a", (), (unknown,)), holds=holds),
        policy(archives_max_age="30d"),
        T0 + 60 * DAY,
    )
    assert result.deletions == () and len(result.held) == 1


def test_subject_hold_keeps_that_subjects_consent_records() -> None:
    holds = HoldSet.of([Hold("h4", "case", "legal", "t", subject="alice")])
    alice = other(ArtefactKind.CONSENT, "c#1", T0, subjects=frozenset({"alice"}))
    bob = other(ArtefactKind.CONSENT, "c#2", T0, subjects=frozenset({"bob"}))
    result = plan(
        state(others=(alice, bob), holds=holds),
        policy(consent_records_max_age="30d"),
        T0 + 60 * DAY,
    )
    assert paths(result) == [bob.path]
    assert [i.artefact.path for i in result.held] == [alice.path]


def test_released_holds_do_not_count() -> None:
    released = Hold("h5", "case", "legal", "t", agent="a", released_at="t2", released_by="x")
    s = state(AgentState("a", (), (archive("a", T0),)), holds=HoldSet.of([released]))
    assert len(plan(s, policy(archives_max_age="30d"), T0 + 60 * DAY).deletions) == 1


def test_plan_records_as_of_and_policy_identity_and_totals() -> None:
    rules = Policy.model_validate(
        {"policy": {"id": "bank", "version": "7"}, "retention": {"archives_max_age": "30d"}}
    )
    s = state(AgentState("a", (), (archive("a", T0), archive("a", T0 + DAY))))
    when = T0 + 45 * DAY
    result = plan(s, rules, when)
    assert (result.as_of, result.policy_id, result.policy_version) == (when, "bank", "7")
    assert result.counts() == {"archives_max_age": 2}
    assert result.bytes_to_free == 200


def test_as_of_in_the_past_sees_less_expired() -> None:
    archives = tuple(archive("a", T0 + i * DAY) for i in range(10))
    s = state(AgentState("a", (), archives))
    rules = policy(archives_max_age="5d")
    assert len(plan(s, rules, T0 + 9 * DAY).deletions) == 4  # days 0..3 are over 5 days old
    assert len(plan(s, rules, T0 + 20 * DAY).deletions) == 10


@settings(max_examples=60, deadline=None)
@given(
    ages=st.lists(st.integers(min_value=0, max_value=400), min_size=0, max_size=15),
    max_age=st.one_of(st.none(), st.integers(min_value=1, max_value=365)),
    max_count=st.one_of(st.none(), st.integers(min_value=1, max_value=10)),
)
def test_archive_rules_match_a_simple_model(
    ages: list[int], max_age: int | None, max_count: int | None
) -> None:
    """Kept = within max_age AND among the newest max_count; nothing else deleted."""
    now = T0 + 500 * DAY
    archives = tuple(
        archive("a", now - age * DAY - i * dt.timedelta(seconds=1)) for i, age in enumerate(ages)
    )
    rules = policy(
        archives_max_age=f"{max_age}d" if max_age else "forever",
        archives_max_count=max_count if max_count else "forever",
    )
    deleted = set(paths(plan(state(AgentState("a", (), archives)), rules, now)))
    newest = sorted(archives, key=lambda a: a.when, reverse=True)
    expected = {
        a.path
        for rank, a in enumerate(newest, start=1)
        if (max_age is not None and now - a.when > max_age * DAY)
        or (max_count is not None and rank > max_count)
    }
    assert deleted == expected


def test_the_audit_floor_counts_from_the_real_time_not_the_planning_time() -> None:
    """Issue 12: a plan dated 2040 must not delete a 2.7-year-old segment under a 6y floor."""
    rules = policy(audit_min_age="6y", audit_max_age="6y")
    segment = other(ArtefactKind.AUDIT, "audit/a.jsonl", T0 - 1000 * DAY)  # 2.7 years old at T0
    s = state(others=(segment,))
    future = dt.datetime(2040, 1, 1)
    assert paths(plan(s, rules, future)) == [".governed_memory/audit/a.jsonl"]  # no floor_now
    assert paths(plan(s, rules, future, floor_now=T0)) == []
    # Once it is really over the floor, the later planning time deletes it.
    assert paths(plan(s, rules, future, floor_now=T0 + 1200 * DAY)) == [
        ".governed_memory/audit/a.jsonl"
    ]
