"""GDPR Art. 12(3) due dates: one month from receipt, counted per Regulation 1182/71."""

from __future__ import annotations

import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from governed_memory._records._deadlines import add_months, internal_due, legal_due

D = dt.date


@pytest.mark.parametrize(
    ("received", "due"),
    [
        (D(2027, 3, 5), D(2027, 4, 5)),  # the same day number of the next month
        (D(2027, 1, 31), D(2027, 2, 28)),  # no 31 February: the month's last day
        (D(2028, 1, 31), D(2028, 2, 29)),  # a leap year
        (D(2028, 1, 29), D(2028, 2, 29)),
        (D(2027, 1, 29), D(2027, 2, 28)),
        (D(2027, 3, 31), D(2027, 4, 30)),
        (D(2027, 12, 15), D(2028, 1, 15)),  # over the year end
        (D(2027, 12, 31), D(2028, 1, 31)),
        (D(2028, 2, 29), D(2028, 3, 29)),  # received on a leap day
    ],
)
def test_a_request_is_due_one_month_after_receipt(received: dt.date, due: dt.date) -> None:
    assert legal_due(received) == due


@pytest.mark.parametrize(
    ("received", "months", "due"),
    [
        (D(2027, 1, 31), 1, D(2027, 3, 31)),  # counted from receipt: the Feb clamp is not kept
        (D(2027, 1, 31), 2, D(2027, 4, 30)),
        (D(2027, 11, 30), 2, D(2028, 2, 29)),  # over the year end into a leap February
        (D(2027, 12, 31), 2, D(2028, 3, 31)),
    ],
)
def test_an_extension_counts_further_months_from_the_day_of_receipt(
    received: dt.date, months: int, due: dt.date
) -> None:
    assert legal_due(received, months) == due


def test_an_extension_beyond_two_months_is_refused_naming_the_rule() -> None:
    with pytest.raises(ValueError, match=r"Art\. 12\(3\) allows two further months"):
        legal_due(D(2027, 1, 1), 3)


def test_the_internal_deadline_is_days_from_receipt_never_after_the_legal_one() -> None:
    assert internal_due(D(2027, 1, 10), dt.timedelta(days=21)) == D(2027, 1, 31)
    # February is short: 30 days would pass the legal due date, which caps it.
    assert internal_due(D(2027, 2, 1), dt.timedelta(days=30)) == D(2027, 3, 1)
    assert internal_due(D(2027, 1, 31), dt.timedelta(days=31)) == D(2027, 2, 28)
    assert internal_due(D(2027, 1, 10), None) is None


def test_an_extension_moves_the_internal_deadline_by_as_much_as_the_legal_one() -> None:
    # received 10 Jan: legal 10 Feb, internal 31 Jan (10 days before); extended by 2: 10 Apr.
    assert internal_due(D(2027, 1, 10), dt.timedelta(days=21), 2) == D(2027, 3, 31)


@given(st.dates(min_value=D(1990, 1, 1), max_value=D(2200, 12, 31)), st.integers(0, 2))
def test_the_due_date_is_in_the_right_month_and_never_before_the_day_number(
    received: dt.date, extension: int
) -> None:
    due = legal_due(received, extension)
    months = (due.year - received.year) * 12 + due.month - received.month
    assert months == 1 + extension
    assert due.day == received.day or (due.day < received.day and (due + dt.timedelta(1)).day == 1)


@given(st.dates(min_value=D(1990, 1, 1), max_value=D(2200, 12, 31)), st.integers(0, 36))
def test_adding_months_is_monotonic(day: dt.date, months: int) -> None:
    assert add_months(day, months) <= add_months(day, months + 1)
    assert add_months(day, 0) == day
