"""When a data-subject request is due: GDPR Art. 12(3) time limits, as pure functions.

Art. 12(3) gives the controller one month from the receipt of a request to
answer it, extendable "by two further months where necessary", the person
being told of the extension, with its reasons, within the first month.

How a month is counted follows Regulation (EEC, Euratom) No 1182/71, which
fixes the rules on periods, dates and time limits for EU acts (the EDPB's
guidelines 01/2022 on the right of access point to it):

* Art. 3(1): the day the request is received is not counted; the period
  starts on the next day.
* Art. 3(2)(c): a period in months ends at the end of the day, in the last
  month, whose number is the same as that of the day of receipt; when that
  day does not exist in the last month (31 January plus one month), the
  period ends at the end of that month's last day (28 or 29 February).

So a request received on 5 March is due by the end of 5 April, one received
on 31 January by the end of 28 February (29 February in a leap year), and
one received on 15 December by the end of 15 January of the next year. An
extension of N months counts the same way from the day of receipt (received
31 January, extended by two months: due 30 April), never from the first due
date, so clamping in a short month is not carried forward.

What is *not* applied: Art. 3(4) moves a time limit that ends on a Saturday,
Sunday or public holiday to the next working day. Public holidays differ per
member state and region, so the register never moves a due date later: its
date is the legal one or earlier, never a day the law does not give.

The policy may set an internal deadline (``[requests] internal_deadline =
"21d"``): ``received + internal_deadline`` days, never later than the legal
due date. An extension moves it by as much as it moves the legal due date, so
the margin the office keeps before the legal date stays the same.
"""

from __future__ import annotations

import calendar
import datetime as _dt

__all__ = [
    "MAX_EXTENSION_MONTHS",
    "add_months",
    "internal_due",
    "legal_due",
]

MAX_EXTENSION_MONTHS = 2
"""Art. 12(3): "extended by two further months where necessary"."""


def add_months(day: _dt.date, months: int) -> _dt.date:
    """``day`` plus ``months`` calendar months, clamped to the last day of a shorter month.

    ``add_months(date(2027, 1, 31), 1)`` is 28 February 2027;
    ``add_months(date(2028, 1, 31), 1)`` is 29 February 2028 (a leap year).
    """
    index = day.year * 12 + (day.month - 1) + months
    year, month = divmod(index, 12)
    last = calendar.monthrange(year, month + 1)[1]
    return _dt.date(year, month + 1, min(day.day, last))


def legal_due(received: _dt.date, extension_months: int = 0) -> _dt.date:
    """The last day to answer a request received on ``received`` (Art. 12(3), see the module).

    Args:
        received: the day the request arrived (any channel).
        extension_months: 0, 1 or 2 further months (Art. 12(3), second sentence).

    Raises:
        ValueError: ``extension_months`` is outside 0..2.
    """
    if not 0 <= extension_months <= MAX_EXTENSION_MONTHS:
        raise ValueError(
            f"an extension of {extension_months} months is outside 0..{MAX_EXTENSION_MONTHS} "
            "(Art. 12(3) allows two further months at most)"
        )
    return add_months(received, 1 + extension_months)


def internal_due(
    received: _dt.date, internal: _dt.timedelta | None, extension_months: int = 0
) -> _dt.date | None:
    """The office's own deadline: ``received + internal`` days, never after the legal one.

    None when the policy sets no internal deadline. An extension moves it by
    as many days as it moves the legal due date (see the module).
    """
    if internal is None:
        return None
    first = legal_due(received)
    own = min(received + _dt.timedelta(days=internal.days), first)
    return own + (legal_due(received, extension_months) - first)
