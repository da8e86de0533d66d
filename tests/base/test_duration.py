"""Durations: huge, non-finite and negative values are refused with the rule and the fix."""

from __future__ import annotations

import datetime as dt
import math
from pathlib import Path

import pytest

from governed_memory import ConfigurationError
from governed_memory._base._duration import MAX_DURATION, parse_duration
from governed_memory._policy import load_policy


@pytest.mark.parametrize(
    "value", ["9999999999999y", "99999999d", "1001y", "9" * 5000 + "s", 10**30, math.inf, 1e300]
)
def test_a_duration_over_1000_years_is_refused_naming_the_maximum(value: object) -> None:
    with pytest.raises(ValueError, match=r"longer than the maximum of 1000y.*'forever'"):
        parse_duration(value)


def test_the_maximum_itself_is_accepted() -> None:
    assert parse_duration("1000y") == MAX_DURATION
    assert parse_duration(MAX_DURATION) == MAX_DURATION


@pytest.mark.parametrize("value", [math.nan, -math.inf, -(10**30)])
def test_nan_and_huge_negative_numbers_are_refused_as_values(value: object) -> None:
    with pytest.raises(ValueError, match=r"duration|not a duration"):
        parse_duration(value)


def test_a_timedelta_over_the_maximum_is_refused() -> None:
    with pytest.raises(ValueError, match="maximum of 1000y"):
        parse_duration(dt.timedelta(days=999_999_999))


def test_a_huge_duration_in_a_policy_file_is_a_policy_error(tmp_path: Path) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text(
        '[policy]\nid = "p"\nversion = "1"\n[retention]\narchives_max_age = "9999999999999y"\n',
        encoding="utf-8",
    )
    with pytest.raises(ConfigurationError, match=r"archives_max_age.*1000y"):
        load_policy(policy)
