"""Known-answer files: the audit log's bytes (entries and head) are pinned byte for byte.

``tests/fixtures/audit-v1/`` was written by :func:`build` with the key and
the clock pinned, by the release before entries were serialized once per
seal. If the first test fails, the format changed and logs written by
earlier releases would no longer verify: bump ``FORMAT_VERSION`` instead (and
keep reading version 1). To regenerate after a deliberate change:
``python tests/audit/test_audit_kat.py``.
"""

from __future__ import annotations

import datetime as dt
import shutil
import sys
from pathlib import Path

from governed_memory import FixedClock
from governed_memory._audit import AuditKey, AuditLog, verify_log
from governed_memory._audit._entry import canonical, parse_entry

FIXTURE = Path(__file__).parents[1] / "fixtures" / "audit-v1"
KEY = AuditKey(bytes(range(32)))


def build(folder: Path) -> None:
    """Write the known-answer log into ``folder``: keyed hashes, escapes, a new month."""
    start = dt.datetime(2026, 11, 30, 23, 59, 59, 999_000, tzinfo=dt.UTC)
    log = AuditLog(folder, KEY, clock=FixedClock(start, tick=dt.timedelta(microseconds=500)))
    log.append(
        "persist",
        {
            "outcome": "ok",
            "agent.hash": KEY.pseudonym("agent", "Bench"),
            "subject.hash": KEY.pseudonym("subject", 'älice "q"'),
            "bytes": 460,
            "purpose": "persist",
            "policy.id": "regulated",
            "policy.version": "1",
        },
    )
    log.append(
        "consent.grant",
        {
            "outcome": "ok",
            "reason": "line\nbreak\t\\ \u2014 \x01 \U0001f600 </script>",
            "ratio": 0.5,
            "flag": True,
            "none": None,
            "list": ["b", "a"],
            "nested": {"z": 1, "a": [1, 2.25]},
        },
    )
    log.append("persist", {"outcome": "memory_only", "subject.hash": KEY.pseudonym("subject", "b")})
    log.close()


def _files(root: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(root.iterdir())}


def test_the_pinned_key_and_clock_reproduce_the_fixture_byte_for_byte(tmp_path: Path) -> None:
    build(tmp_path / "audit")
    written = _files(tmp_path / "audit")
    # audit.tail (the chain hint for writers in other processes, docs/audit.md) came after
    # the fixture; a reader never needs it, so the pinned files are the segments and the head.
    assert set(written) - set(_files(FIXTURE)) == {"audit.tail"}
    assert {name: written[name] for name in _files(FIXTURE)} == _files(FIXTURE)


def test_the_fixture_verifies(tmp_path: Path) -> None:
    shutil.copytree(FIXTURE, tmp_path / "audit")
    report = verify_log(tmp_path / "audit", KEY)
    assert report.ok and report.complete
    assert report.segments == ("audit-2026-11.jsonl", "audit-2026-12.jsonl")


def test_every_fixture_line_is_the_canonical_encoding_of_its_entry() -> None:
    for segment in sorted(FIXTURE.glob("*.jsonl")):
        for line in segment.read_bytes().splitlines():
            entry = parse_entry(line)
            assert line == canonical(entry.to_dict())
            assert entry.check(KEY) == (True, True)


if __name__ == "__main__":
    shutil.rmtree(FIXTURE, ignore_errors=True)
    build(FIXTURE)
    (FIXTURE / "audit.tail").unlink(missing_ok=True)
    sys.exit(0)
