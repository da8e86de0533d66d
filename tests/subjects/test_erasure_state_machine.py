"""Stateful property test: adds, compactions, purges, exports and erasures against a model.

The model keeps, per agent, the active memory and the archives as lists of
items: a record ``(content, subject)``, a summary ``(content, lineage)`` or an
erasure marker. After every step the disk (read through the store, so
decrypted where encrypted) must equal the model; every export must hold
exactly the model's records of the subject; after an erasure no byte of the
subject's content may be readable anywhere under the workspace.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from subjects_helpers import conversation, readable_text

from governed_memory import (
    FixedClock,
    Governance,
    erase,
    export_agent,
    export_subject,
    parse_memory,
)
from governed_memory._format._lineage import ERASED_MARKER_KEY, record_lineage
from governed_memory._policy._model import Policy
from governed_memory._retention import Retention

AGENTS = ("A", "B", "C")
SUBJECTS = ("s1", "s2", "s3")


@dataclass
class Item:
    kind: str  # "rec" | "sum" | "marker"
    content: str = ""
    subject: str | None = None
    lineage: frozenset[str] = frozenset()


@dataclass
class AgentModel:
    active: list[Item] = field(default_factory=list)
    archives: list[list[Item]] = field(default_factory=list)

    def files(self) -> list[list[Item]]:
        return [*self.archives, self.active]


def _subjects_of(items: list[Item]) -> set[str]:
    found: set[str] = set()
    for item in items:
        if item.kind == "rec" and item.subject is not None:
            found.add(item.subject)
        found |= item.lineage
    return found


class ErasureMachine(RuleBasedStateMachine):
    """Plaintext workspaces; a subclass runs the same rules encrypted."""

    def make_governance(self, workspace: Path, clock: FixedClock, policy: Policy) -> Governance:
        return Governance(workspace=workspace, policy=policy, clock=clock)

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="gm-erasure-sm-"))
        self.clock = FixedClock(dt.datetime(2026, 11, 30, 10), tick=dt.timedelta(seconds=1))
        policy = Policy.model_validate({"retention": {"archives_max_count": 2}})
        self.gov = self.make_governance(self.tmp / "ws", self.clock, policy)
        self.model: dict[str, AgentModel] = {}
        self.erased: set[str] = set()  # content that must be unreadable
        self.counter = 0
        self.exports = 0

    def teardown(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)

    def _token(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}-{self.counter:04d}-zq"

    # -- rules -------------------------------------------------------------

    @initialize(subjects=st.lists(st.sampled_from(SUBJECTS), min_size=1, max_size=3))
    def seed(self, subjects: list[str]) -> None:
        """Start from summaries with a lineage, so erasures meet them early."""
        for subject in subjects:
            self.add("A", subject, 1)
        self.compact("A")
        self.add("A", subjects[0], 1)

    @rule(agent=st.sampled_from(AGENTS), subject=st.sampled_from(SUBJECTS), n=st.integers(1, 3))
    def add(self, agent: str, subject: str, n: int) -> None:
        conv = conversation(self.gov, agent)
        model = self.model.setdefault(agent, AgentModel())
        for _ in range(n):
            content = self._token(f"msg-{subject}")
            conv.add("Human", content, subject_id=subject)
            model.active.append(Item("rec", content, subject))
        conv.store.close()  # type: ignore[union-attr]

    @rule(agent=st.sampled_from(AGENTS))
    def compact(self, agent: str) -> None:
        conv = conversation(self.gov, agent)
        model = self.model.setdefault(agent, AgentModel())
        content = self._token("sum")
        conv.compact(f"[Compressed Memory Summary] {content}")
        # A fresh conversation summarises exactly its preload: the active memory.
        lineage = frozenset(_subjects_of(model.active))
        if model.active:
            model.archives.append(model.active)
        model.active = [Item("sum", f"[Compressed Memory Summary] {content}", None, lineage)]
        conv.store.close()  # type: ignore[union-attr]

    @rule()
    def purge(self) -> None:
        Retention(self.gov).purge(as_of=self.clock.now())
        for model in self.model.values():
            for dropped in model.archives[:-2]:
                # Purged files are deleted whole: their content is gone too.
                self.erased |= {i.content for i in dropped if i.kind != "marker"}
            model.archives = model.archives[-2:]

    @rule(subject=st.sampled_from(SUBJECTS), agent=st.none() | st.sampled_from(AGENTS))
    def erase_subject(self, subject: str, agent: str | None) -> None:
        if agent is not None and agent not in self.model:
            return
        receipt = erase(self.gov, subject=subject, agent=agent)
        removed = 0
        for name, model in self.model.items():
            if agent is not None and name != agent:
                continue
            for items in model.files():
                for i, item in enumerate(list(items)):
                    if item.kind == "rec" and item.subject == subject:
                        self.erased.add(item.content)
                        removed += 1
                    elif item.kind == "sum" and subject in item.lineage:
                        self.erased.add(item.content)
                        items[i] = Item("marker")
                items[:] = [x for x in items if not (x.kind == "rec" and x.subject == subject)]
        assert receipt.records == removed

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def erase_agent(self, data: st.DataObject) -> None:
        agent = data.draw(st.sampled_from(sorted(self.model)))
        erase(self.gov, agent=agent)
        for items in self.model.pop(agent).files():
            self.erased |= {i.content for i in items if i.kind != "marker"}

    @rule(subject=st.sampled_from(SUBJECTS))
    def export(self, subject: str) -> None:
        self.exports += 1
        out = self.tmp / f"export-{self.exports}"
        export_subject(self.gov, subject, out)
        document = json.loads((out / "export.json").read_text())
        expected = [
            i.content
            for name in sorted(self.model)
            for items in self.model[name].files()
            for i in items
            if i.kind == "rec" and i.subject == subject
        ]
        assert [r["content"] for r in document["records"]] == expected
        summaries = {
            i.content
            for m in self.model.values()
            for items in m.files()
            for i in items
            if i.kind == "sum" and subject in i.lineage
        }
        assert len(document["summaries"]) == len(summaries)
        text = "".join((out / n).read_text() for n in ("export.json", "export.md"))
        for other in SUBJECTS:
            if other != subject:
                assert f"msg-{other}-" not in text
        shutil.rmtree(out)

    @precondition(lambda self: bool(self.model))
    @rule(data=st.data())
    def export_whole_agent(self, data: st.DataObject) -> None:
        agent = data.draw(st.sampled_from(sorted(self.model)))
        self.exports += 1
        out = self.tmp / f"export-{self.exports}"
        export_agent(self.gov, agent, out)
        document = json.loads((out / "export.json").read_text())
        items = [i for f in self.model[agent].files() for i in f if i.kind != "sum"]
        # A whole-agent export holds every record, erasure markers included.
        expected = [i.content if i.kind == "rec" else "[Summary removed" for i in items]
        got = [r["content"] if r["subject"] else r["content"][:16] for r in document["records"]]
        assert got == expected
        shutil.rmtree(out)

    # -- invariants ----------------------------------------------------------

    @invariant()
    def disk_matches_model(self) -> None:
        agents_dir = self.gov.workspace / "agents"
        on_disk = sorted(p.name for p in agents_dir.iterdir()) if agents_dir.exists() else []
        assert on_disk == sorted(self.model)
        for name, model in self.model.items():
            store = self.gov.store_factory(agents_dir / name / "MEMORY.md", lambda: "")
            try:
                texts = [store.read_archive(p) for p in store.list_archives()]
                texts.append(store.read_memory() or "")
            finally:
                store.close()
            assert len(texts) == len(model.files())
            for text, items in zip(texts, model.files(), strict=True):
                records = parse_memory(text).records
                assert len(records) == len(items)
                for record, item in zip(records, items, strict=True):
                    if item.kind == "rec":
                        assert (record.content, record.subject_id) == (item.content, item.subject)
                    elif item.kind == "sum":
                        assert record.content == item.content
                        assert set(record_lineage(record)) == set(item.lineage)
                    else:
                        assert ERASED_MARKER_KEY in record.meta

    @invariant()
    def erased_content_is_unreadable(self) -> None:
        if not self.erased:
            return
        text = readable_text(self.gov)
        for content in self.erased:
            assert content not in text, content


TestErasurePlaintext = ErasureMachine.TestCase
TestErasurePlaintext.settings = settings(
    max_examples=12,
    stateful_step_count=12,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


class EncryptedErasureMachine(ErasureMachine):
    """The same rules on an encrypted workspace (erasure also crypto-shreds)."""

    def make_governance(self, workspace: Path, clock: FixedClock, policy: Policy) -> Governance:
        from governed_memory._crypto._providers import InMemoryKeyProvider

        data = policy.model_dump(exclude={"source"}, mode="json")
        data["encryption"] = {"enabled": True}
        return Governance(
            workspace=workspace,
            policy=Policy.model_validate(data),
            clock=clock,
            key_provider=InMemoryKeyProvider(),
        )


TestErasureEncrypted = EncryptedErasureMachine.TestCase
TestErasureEncrypted.settings = TestErasurePlaintext.settings
