"""Property: wherever a subject's records sit among an agent's memories, export and erasure find them.

Records and summaries of three subjects are placed at random in the agent's
own memory and archive (written before isolation) and in each subject's
memory and archive; summaries carry a random lineage. Then: each subject's
export holds exactly their records and the summaries derived from them;
erasing one subject leaves none of their records or derived summaries
readable, deletes their folder, keeps every other record, and leaves every
memory that held nothing of theirs byte for byte as it was.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from subjects_helpers import all_bytes, governance

from governed_memory import FixedClock, Governance
from governed_memory._format import LINEAGE_KEY, render_block, render_header
from governed_memory._stores import AgentStore
from governed_memory._subjects import erase, export_subject

SUBJECTS = ("s1", "s2", "s3")
PLACES = ("agent-archive", "agent-memory", "own-archive", "own-memory")


@dataclass(frozen=True)
class Item:
    content: str
    subject: str
    place: str
    lineage: frozenset[str] = frozenset()  # empty: a record; else a summary

    @property
    def summary(self) -> bool:
        return bool(self.lineage)

    def block(self) -> str:
        meta: dict[str, object] = {"subject": self.subject}
        if self.summary:
            meta[LINEAGE_KEY] = sorted(self.lineage)
        role = "System" if self.summary else "Human"
        return render_block(role, "2026-11-30T10:00:00", self.content, meta)

    def of(self, subject: str) -> bool:
        """Whether the item is ``subject``'s data (their record, or a summary derived from them)."""
        return self.subject == subject or subject in self.lineage


@st.composite
def items(draw: st.DrawFn) -> list[Item]:
    found = []
    for n in range(draw(st.integers(1, 12))):
        subject = draw(st.sampled_from(SUBJECTS))
        place = draw(st.sampled_from(PLACES))
        others = draw(st.sets(st.sampled_from(SUBJECTS))) if draw(st.booleans()) else None
        if others is None:
            found.append(Item(f"rec-{n}-{subject}", subject, place))
        else:
            found.append(Item(f"sum-{n}-{subject}", subject, place, frozenset({subject} | others)))
    return found


def _store(gov: Governance) -> AgentStore:
    return gov.store_factory(
        gov.workspace / "agents" / "A" / "MEMORY.md",
        lambda: render_header("A_conv", "2026-11-30T10:00:00"),
    )


def _write(gov: Governance, placed: list[Item]) -> None:
    agent = _store(gov)
    targets: list[tuple[AgentStore, str]] = [(agent, "agent")]
    targets += [(agent.subject_store(s), s) for s in SUBJECTS]
    for store, who in targets:
        mine = [i for i in placed if (i.place.startswith("agent") and who == "agent")]
        mine += [i for i in placed if i.place.startswith("own") and i.subject == who]
        archived = [i for i in mine if i.place.endswith("archive")]
        for item in archived:
            store.append(item.block())
        if archived:
            store.compact(None)
        for item in mine:
            if item.place.endswith("memory"):
                store.append(item.block())
        store.close()


def _folder(gov: Governance, subject: str) -> Path:
    agent = _store(gov)
    partition = agent.subject_store(subject).partition
    agent.close()
    assert partition is not None
    return gov.workspace / "agents" / "A" / "subjects" / partition


def _readable(gov: Governance) -> str:
    agent = _store(gov)
    parts = []
    for store in [agent, *agent.subject_stores()]:
        parts.append(store.read_memory() or "")
        parts.extend(store.read_archive(a) for a in store.list_archives())
        store.close()
    return "\n".join(parts)


def _check(kind: str, placed: list[Item], erased: str) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        gov = governance(Path(tmp) / "ws", FixedClock(), kind=kind)
        _write(gov, placed)
        for subject in SUBJECTS:
            out = Path(tmp) / f"export-{subject}"
            export_subject(gov, subject, out)
            document = json.loads((out / "export.json").read_text())
            records = sorted(r["content"] for r in document["records"])
            assert records == sorted(
                i.content for i in placed if not i.summary and i.subject == subject
            )
            summaries = sorted(s["content"] or "" for s in document["summaries"])
            assert summaries == sorted(
                i.content if i.lineage <= {subject} else ""
                for i in placed
                if i.summary and i.of(subject)
            )
        untouched = {
            s: all_bytes(_folder(gov, s))
            for s in SUBJECTS
            if s != erased
            and _folder(gov, s).exists()
            and not any(
                i.of(erased) for i in placed if i.place.startswith("own") and i.subject == s
            )
        }
        erase(gov, subject=erased)
        text = _readable(gov)
        for item in placed:
            assert (item.content in text) == (not item.of(erased)), item
        assert not _folder(gov, erased).exists()
        for subject, before in untouched.items():
            assert all_bytes(_folder(gov, subject)) == before


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(placed=items(), erased=st.sampled_from(SUBJECTS))
def test_export_and_erasure_find_a_subject_wherever_their_records_are(
    placed: list[Item], erased: str
) -> None:
    _check("plaintext", placed, erased)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(placed=items(), erased=st.sampled_from(SUBJECTS))
def test_the_same_in_an_encrypted_workspace(placed: list[Item], erased: str) -> None:
    _check("encrypted", placed, erased)
