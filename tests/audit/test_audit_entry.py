"""An entry is serialized once per seal: the line and the hashed body are canonical JSON."""

from __future__ import annotations

import datetime as dt
import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from governed_memory._audit import AuditKey, _entry
from governed_memory._audit._entry import FORMAT_VERSION, canonical

seal, seal_head, format_ts = _entry.seal, _entry.seal_head, _entry.format_ts

KEY = AuditKey(bytes(range(32)))
_text = st.text(st.characters(exclude_categories=("Cs",)), max_size=20)
_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), _text
)
_value = st.recursive(_scalar, lambda inner: st.lists(inner, max_size=3), max_leaves=6)


@given(
    attrs=st.dictionaries(_text, _value, max_size=6),
    event=_text,
    ts=_text,
    prev=_text,
    seq=st.integers(min_value=0),
)
def test_the_sealed_line_and_body_are_the_canonical_encodings(
    attrs: dict[str, object], event: str, ts: str, prev: str, seq: int
) -> None:
    entry = seal(seq=seq, ts=ts, event=event, attrs=attrs, prev=prev, key=KEY)
    body = {
        "v": FORMAT_VERSION,
        "seq": seq,
        "ts": ts,
        "event": event,
        "attrs": attrs,
        "kid": KEY.key_id,
        "prev": prev,
    }
    assert entry.hash == hashlib.sha256(canonical(body)).hexdigest()
    assert entry.mac == KEY.mac(canonical(body))
    assert entry.line == canonical({**body, "hash": entry.hash, "mac": entry.mac})
    assert entry.check(KEY) == (True, True)


@given(seq=st.integers(min_value=0), digest=_text, segment=_text)
def test_the_head_record_is_its_canonical_encoding(seq: int, digest: str, segment: str) -> None:
    body = {"v": FORMAT_VERSION, "seq": seq, "hash": digest, "segment": segment}
    mac = KEY.mac(b"head\x00" + canonical(body))
    assert seal_head(KEY, seq, digest, segment) == canonical({**body, "mac": mac})


def test_a_seq_that_is_not_an_int_is_refused_naming_its_type() -> None:
    with pytest.raises(_entry.EntryFormatError, match="seq True is bool"):
        seal(seq=True, ts="t", event="persist", attrs={}, prev="0", key=KEY)


def test_a_sealed_entry_parses_back_to_itself() -> None:
    entry = seal(
        seq=7,
        ts="2026-11-30T10:00:00.000000Z",
        event="persist",
        attrs={"n": 1},
        prev="0" * 64,
        key=KEY,
    )
    assert _entry.parse_entry(entry.line) == entry


# A day inside the range at both ends: every time zone's reading converts to UTC.
@given(
    st.datetimes(
        min_value=dt.datetime(1, 1, 2),
        max_value=dt.datetime(9999, 12, 30),
        timezones=st.timezones(),
    )
)
def test_timestamps_are_written_as_strftime_writes_them(when: dt.datetime) -> None:
    assert format_ts(when) == when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _strptime(ts: str) -> dt.datetime:
    return dt.datetime.strptime(ts, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.UTC)


@given(ts=st.one_of(st.datetimes(timezones=st.just(dt.UTC)).map(format_ts), _text))
def test_an_entrys_time_is_read_exactly_as_strptime_reads_its_ts(ts: str) -> None:
    """``time`` reads ``ts`` with fromisoformat when it can, and says what strptime would."""
    entry = seal(seq=1, ts=ts, event="persist", attrs={}, prev="", key=KEY)
    try:
        expected = _strptime(ts)
    except ValueError:
        with pytest.raises(ValueError):
            _ = entry.time
    else:
        assert entry.time == expected and entry.time.tzinfo is dt.UTC


@pytest.mark.parametrize(
    "ts", ["2026-12-06T22:41:56,123456Z", "2026-12-06 22:41:56.123456Z", "20261206T224156.123456Z"]
)
def test_an_entrys_time_refuses_what_strptime_refuses(ts: str) -> None:
    with pytest.raises(ValueError):
        _ = seal(seq=1, ts=ts, event="persist", attrs={}, prev="", key=KEY).time
