"""Known answers: every registry writes the same bytes as the release that defined its format.

One scenario (two consent events, two holds and a release, a pending erasure
with one progress line, a scheduled erasure) is written in plaintext and
sealed with every random source pinned. Plaintext files are pinned byte for
byte; sealed files by their SHA-256. If one of these changes, a file written
by an earlier release may no longer read: bump that registry's format version
instead (and keep reading the old one).
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from crypto_helpers import TEST_MASTER_KEY

from governed_memory import FixedClock
from governed_memory._crypto import Keyring, LocalKeyProvider, RecordSealing
from governed_memory._records import (
    ConsentAction,
    ConsentRegistry,
    ErasureScope,
    HoldRegistry,
    ScheduledErasure,
    Tombstone,
    TombstoneStore,
)
from governed_memory.testing import SeededRandom

AT = dt.datetime(2026, 5, 1, 9, 0, tzinfo=dt.timezone(dt.timedelta(hours=2)))
ERASURE = "20260501T070000000000Z-0a0b0c0d"
SCHEDULED = "20260501T070000000001Z-01020304"
PROGRESS = f"tombstones/.{ERASURE}.progress.jsonl"

PLAINTEXT = {
    # Version 2 since the record chain (issue 13): each line carries its seq and the
    # link of the line before it. The version 1 bytes are pinned below (CONSENT_V1).
    "consent.jsonl": (
        b'{"action":"grant","actor":"dpo@example.org","at":"2026-05-01T09:00:00+02:00",'
        b'"policy_id":"p","policy_version":"3","prev":"00000000000000000000000000000000",'
        b'"purpose":"persist","seq":1,"subject":"customer-42","v":2}\n'
        b'{"action":"withdraw","actor":"dpo@example.org","at":"2026-05-01T09:00:00+02:00",'
        b'"policy_id":"p","policy_version":"3","prev":"d048b63b707a183b854cdb33c82066d5",'
        b'"purpose":"persist","seq":2,"subject":"customer-42","v":2}\n'
    ),
    "holds.json": (
        b'{\n "v": 1,\n "holds": [\n  {\n   "id": "hold-00000001",\n   "reason": "case 2026-114",'
        b'\n   "placed_by": "legal@example.org",\n   "placed_at": "2026-05-01T09:00:00+02:00",\n'
        b'   "agent": "A",\n   "released_at": "2026-05-01T09:00:00+02:00",\n'
        b'   "released_by": "legal@example.org",\n   "release_reason": "closed"\n  },\n  {\n'
        b'   "id": "hold-00000002",\n   "reason": "matter",\n   "placed_by": "legal@example.org",'
        b'\n   "placed_at": "2026-05-01T09:00:00+02:00",\n   "subject": "customer-42"\n  }\n ]\n}\n'
    ),
    f"scheduled-erasures/{SCHEDULED}.json": (
        b'{\n  "due_at": "2026-05-01T09:00:00+02:00",\n  "id": "20260501T070000000001Z-01020304",'
        b'\n  "reason": "grace",\n  "requested_at": "2026-05-01T09:00:00+02:00",\n'
        b'  "requested_by": "dpo",\n  "scope": {\n    "agent": "B",\n    "subject": null\n  },\n'
        b'  "v": 1\n}\n'
    ),
    PROGRESS: b'{"agent":"A","files":[{"agent":"A","file":"agents/A/MEMORY.md","records":2}]}\n',
    f"tombstones/{ERASURE}.json": (
        b'{\n  "completed_at": null,\n  "id": "20260501T070000000000Z-0a0b0c0d",\n'
        b'  "policy_id": "p",\n  "policy_version": "3",\n  "reason": "art. 17",\n'
        b'  "receipt": null,\n  "requested_at": "2026-05-01T09:00:00+02:00",\n'
        b'  "requested_by": "dpo",\n  "scope": {\n    "agent": null,\n'
        b'    "subject": "customer-42"\n  },\n  "state": "pending",\n  "v": 1\n}\n'
    ),
}

SEALED_SHA256 = {
    "consent.jsonl": "5e1c8fdc4e6d336f71bdc61b8171da5c76aa535fa77b979ff62c64eee7e25a4f",
    "holds.json": "908db62fb728cdc8a2cef38e0dab404e0c751bf2cb92be6c905d9ad759238c66",
    f"scheduled-erasures/{SCHEDULED}.json": (
        "be6ba8a6e8a2574ebcfc97d3d92ff78cc31fe23745016988b49b84d32e0f87d2"
    ),
    PROGRESS: "375765f3af66eb6ec4c4cc0a37cec2ad9799f3a54fb19b8fc41a7e97f7af1f6f",
    f"tombstones/{ERASURE}.json": (
        "4593c0590e09aead4f0eec669083cc796cf5e8f03e43e7a1bf1fd60199216039"
    ),
}


# The consent log as releases before the record chain wrote it (format version 1).
CONSENT_V1 = (
    b'{"action":"grant","actor":"dpo@example.org","at":"2026-05-01T09:00:00+02:00",'
    b'"policy_id":"p","policy_version":"3","purpose":"persist","subject":"customer-42","v":1}\n'
    b'{"action":"withdraw","actor":"dpo@example.org","at":"2026-05-01T09:00:00+02:00",'
    b'"policy_id":"p","policy_version":"3","purpose":"persist","subject":"customer-42","v":1}\n'
)


def pinned_sealing(folder: Path) -> RecordSealing:
    keyring = Keyring(
        folder,
        LocalKeyProvider(TEST_MASTER_KEY, random=SeededRandom(b"wrap")),
        random=SeededRandom(b"keys"),
    )
    return RecordSealing(keyring, random=SeededRandom(b"nonces"))


def write_scenario(gov: Path, sealing: RecordSealing | None) -> None:
    consent = ConsentRegistry(gov, sealing=sealing)
    for action in (ConsentAction.GRANT, ConsentAction.WITHDRAW):
        event = consent.make_event(
            "customer-42",
            "persist",
            action,
            at=AT,
            actor="dpo@example.org",
            policy_id="p",
            policy_version="3",
        )
        consent.record(event)
    ids: Iterator[str] = iter(["hold-00000001", "hold-00000002"])
    holds = HoldRegistry(gov, clock=FixedClock(AT), id_factory=lambda: next(ids), sealing=sealing)
    holds.place(agent="A", reason="case 2026-114", actor="legal@example.org")
    holds.place(subject="customer-42", reason="matter", actor="legal@example.org")
    holds.release(agent="A", actor="legal@example.org", reason="closed")
    tombstones = TombstoneStore(gov, sealing=sealing)
    tombstone = Tombstone(
        id=ERASURE,
        scope=ErasureScope(subject="customer-42"),
        requested_at=AT.isoformat(),
        requested_by="dpo",
        reason="art. 17",
        policy_id="p",
        policy_version="3",
    )
    tombstones.write(tombstone)
    tombstones.log_progress(
        ERASURE,
        {"agent": "A", "files": [{"agent": "A", "file": "agents/A/MEMORY.md", "records": 2}]},
    )
    tombstones.schedule(
        ScheduledErasure(
            id=SCHEDULED,
            scope=ErasureScope(agent="B"),
            due_at=AT.isoformat(),
            requested_at=AT.isoformat(),
            requested_by="dpo",
            reason="grace",
        )
    )


def stored_records(gov: Path) -> dict[str, bytes]:
    """Every record file written (lock files are empty and carry no format)."""
    return {
        p.relative_to(gov).as_posix(): p.read_bytes()
        for p in sorted(gov.rglob("*"))
        if p.is_file() and not p.name.endswith(".lock")
    }


def test_plaintext_registries_write_the_pinned_bytes(tmp_path: Path) -> None:
    """Version 1 everywhere, but the consent log: version 2 (the chained records)."""
    write_scenario(tmp_path / "gov", None)
    assert stored_records(tmp_path / "gov") == PLAINTEXT


def test_sealed_registries_write_the_pinned_envelopes(tmp_path: Path) -> None:
    write_scenario(tmp_path / "gov", pinned_sealing(tmp_path / "kr"))
    digests = {
        name: hashlib.sha256(data).hexdigest()
        for name, data in stored_records(tmp_path / "gov").items()
    }
    assert digests == SEALED_SHA256


@pytest.mark.parametrize("sealed", [False, True], ids=["plaintext", "sealed"])
def test_the_pinned_files_read_back(tmp_path: Path, sealed: bool) -> None:
    sealing = pinned_sealing(tmp_path / "kr") if sealed else None
    write_scenario(tmp_path / "gov", sealing)
    gov = tmp_path / "gov"
    assert [e.action for e in ConsentRegistry(gov, sealing=sealing).history()] == [
        ConsentAction.GRANT,
        ConsentAction.WITHDRAW,
    ]
    holds = HoldRegistry(gov, sealing=sealing).holds(include_released=True)
    assert [h.id for h in holds] == ["hold-00000001", "hold-00000002"]
    tombstones = TombstoneStore(gov, sealing=sealing)
    assert [t.id for t in tombstones.pending()] == [ERASURE]
    assert tombstones.progress(ERASURE)[0]["agent"] == "A"
    assert [s.id for s in tombstones.scheduled()] == [SCHEDULED]


def test_a_version_1_consent_log_still_reads_and_the_next_record_chains_onto_it(
    tmp_path: Path,
) -> None:
    """The unchained prefix: the old lines read as before; the first new one pins them all."""
    gov = tmp_path / "gov"
    gov.mkdir()
    (gov / "consent.jsonl").write_bytes(CONSENT_V1)
    registry = ConsentRegistry(gov)
    assert [e.action for e in registry.history()] == [
        ConsentAction.GRANT,
        ConsentAction.WITHDRAW,
    ]
    registry.record(
        registry.make_event(
            "customer-42",
            "persist",
            ConsentAction.GRANT,
            at=AT,
            actor="dpo@example.org",
            policy_id="p",
            policy_version="3",
        )
    )
    data = (gov / "consent.jsonl").read_bytes()
    assert data.startswith(CONSENT_V1)
    assert data[len(CONSENT_V1) :] == (
        b'{"action":"grant","actor":"dpo@example.org","at":"2026-05-01T09:00:00+02:00",'
        b'"policy_id":"p","policy_version":"3","prev":"9cefe15fbb1346ef3d3c2365226da877",'
        b'"purpose":"persist","seq":3,"subject":"customer-42","v":2}\n'
    )
    assert ConsentRegistry(gov).is_granted("customer-42", "persist")
