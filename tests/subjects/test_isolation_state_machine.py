"""Stateful property test: several customers on one shared agent under subject isolation.

Issue 12, Build 7. Adds (also of one subject inside another's conversation),
compactions (manual over ``compaction_transcript`` and the ContextCompressor),
grants, withdrawals, holds, erasures, exports and fresh preloads run in random
order over one agent, "Teller", under a policy that isolates subjects, needs
``persist`` consent and leaves unconsented turns out of summaries. After every
step:

* no subject's content appears in another subject's preload, export or summary;
* nothing a subject said while they had no ``persist`` consent is readable on
  disk (raw bytes, or any store's decrypted text), unless they granted since;
* nothing of an erased subject is readable on disk (their erasure was not
  blocked by a hold);
* every summary stored in a subject's memory has that subject alone as lineage.
"""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import tempfile
from pathlib import Path
from types import SimpleNamespace

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from governed_memory import (
    ContextCompressor,
    Conversation,
    ErasedDuringCompactionError,
    ErasureBlockedError,
    FixedClock,
    Governance,
    erase,
    export_subject,
    memory_md_path,
    parse_memory,
)
from governed_memory._format import LINEAGE_KEY, record_subjects
from governed_memory._policy._model import Policy
from governed_memory._records._holds import HoldRegistry

SUBJECTS = ("s1", "s2", "s3")
TOKEN = re.compile(r"tok-(s\d)-\d{4}")
POLICY = Policy.model_validate(
    {
        "policy": {"id": "isolated-sm", "version": "1"},
        "consent": {"required_for": ["persist"], "on_missing": "memory_only"},
        "memory": {"isolation": "subject"},
        "summarization": {"without_consent": "leave_out"},
    }
)


def _tokens(text: str) -> set[tuple[str, str]]:
    """(token, subject) of every token in ``text``."""
    return {(m.group(0), m.group(1)) for m in TOKEN.finditer(text)}


class IsolationMachine(RuleBasedStateMachine):
    """Plaintext; a subclass runs the same rules encrypted."""

    def make_governance(self, workspace: Path, clock: FixedClock) -> Governance:
        return Governance(workspace=workspace, policy=POLICY, clock=clock)

    def __init__(self) -> None:
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp(prefix="gm-isolation-sm-"))
        self.clock = FixedClock(dt.datetime(2026, 12, 1, 9), tick=dt.timedelta(seconds=1))
        self.gov = self.make_governance(self.tmp / "ws", self.clock)
        self.holds = HoldRegistry(
            self.gov.governance_dir, clock=self.gov.clock, sealing=self.gov.sealing
        )
        self.live: dict[str, Conversation] = {}
        self.consented: set[str] = set()
        self.held: dict[str, str] = {}  # subject -> hold id
        self.unconsented: set[str] = set()  # tokens said without consent, not granted since
        self.erased: set[str] = set()  # tokens that must be unreadable
        self.said: dict[str, list[str]] = {s: [] for s in SUBJECTS}
        self.counter = 0
        self.exports = 0

    def teardown(self) -> None:
        for conversation in self.live.values():
            if conversation.store is not None:
                conversation.store.close()
        shutil.rmtree(self.tmp, ignore_errors=True)

    # -- helpers -----------------------------------------------------------

    def _open(self, subject: str) -> Conversation:
        return Conversation(
            name="teller",
            subject_id=subject,
            memory_md_path=memory_md_path("Teller", self.gov.workspace),
            governance=self.gov,
        )

    def _conversation(self, subject: str) -> Conversation:
        if subject not in self.live:
            self.live[subject] = self._open(subject)
        return self.live[subject]

    def _stores(self) -> list[object]:
        agent = self.gov.store_factory(memory_md_path("Teller", self.gov.workspace), lambda: "")
        return [agent, *agent.subject_stores()]

    def _disk_text(self) -> str:
        """Everything readable under the workspace: raw bytes and each store's decrypted text."""
        parts = [
            p.read_bytes().decode("utf-8", "replace")
            for p in self.gov.workspace.rglob("*")
            if p.is_file()
        ]
        for store in self._stores():
            parts.append(store.read_memory() or "")  # type: ignore[attr-defined]
            parts.extend(store.read_archive(a) for a in store.list_archives())  # type: ignore[attr-defined]
            store.close()  # type: ignore[attr-defined]
        return "\n".join(parts)

    # -- rules -------------------------------------------------------------

    @initialize(consenting=st.sets(st.sampled_from(SUBJECTS), min_size=1))
    def seed(self, consenting: set[str]) -> None:
        """Consent for some, a turn of each in their own conversation, one visit to another's."""
        for subject in sorted(consenting):
            self.grant(subject)
        for subject in SUBJECTS:
            self.add(subject, subject, 1)
        self.add(SUBJECTS[0], SUBJECTS[1], 1)

    @rule(subject=st.sampled_from(SUBJECTS))
    def grant(self, subject: str) -> None:
        self.gov.grant(subject, "persist", actor="dpo")
        self.consented.add(subject)
        # Their earlier words are theirs to have stored now (a later summary may).
        self.unconsented -= set(self.said[subject])

    @rule(subject=st.sampled_from(SUBJECTS))
    def withdraw(self, subject: str) -> None:
        if subject in self.consented:
            self.gov.withdraw(subject, "persist", actor=subject)
            self.consented.discard(subject)

    @rule(
        owner=st.sampled_from(SUBJECTS),
        speaker=st.sampled_from(SUBJECTS),
        n=st.integers(1, 3),
    )
    def add(self, owner: str, speaker: str, n: int) -> None:
        """``speaker`` says something in ``owner``'s conversation (mostly their own)."""
        conversation = self._conversation(owner)
        for _ in range(n):
            self.counter += 1
            token = f"tok-{speaker}-{self.counter:04d}"
            conversation.add("Human", f"{token} says hello", subject_id=speaker)
            self.said[speaker].append(token)
            if speaker not in self.consented:
                self.unconsented.add(token)

    @rule(owner=st.sampled_from(SUBJECTS), use_compressor=st.booleans())
    def compact(self, owner: str, use_compressor: bool) -> None:
        conversation = self._conversation(owner)
        for _ in range(3):  # an erasure since the last look: summarise again
            try:
                if use_compressor:
                    agent = SimpleNamespace(
                        short_memory=conversation,
                        agent_name="Teller",
                        context_length=10_000,
                        model_name="local/extractive",
                    )
                    ContextCompressor(summarizer_model="local/extractive").compress(agent)
                else:
                    text, _ = conversation.compaction_transcript()
                    words = " ".join(sorted(t for t, _ in _tokens(text)))
                    conversation.compact(
                        f"[Compressed Memory Summary] {words or 'nothing'}",
                        keep_other_subjects=True,
                    )
                return
            except ErasedDuringCompactionError:
                continue

    @rule(subject=st.sampled_from(SUBJECTS))
    def reopen(self, subject: str) -> None:
        """A restart: the subject's conversation preloads again."""
        old = self.live.pop(subject, None)
        if old is not None and old.store is not None:
            old.store.close()
        conversation = self._conversation(subject)
        seen = {s for _, s in _tokens(conversation.get_str())}
        assert seen <= {subject}, f"{subject}'s preload shows {seen - {subject}}"

    @rule(subject=st.sampled_from(SUBJECTS))
    def hold(self, subject: str) -> None:
        if subject not in self.held:
            hold = self.holds.place(subject=subject, reason="litigation", actor="legal")
            self.held[subject] = hold.id

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data())
    def release(self, data: st.DataObject) -> None:
        subject = data.draw(st.sampled_from(sorted(self.held)))
        self.holds.release(hold_id=self.held.pop(subject), actor="legal")

    @rule(subject=st.sampled_from(SUBJECTS))
    def erase_subject(self, subject: str) -> None:
        try:
            receipt = erase(self.gov, subject=subject, reason="DSR")
        except ErasureBlockedError:
            assert subject in self.held
            return
        assert subject not in self.held
        # Under isolation no summary holds two subjects, so no other hold blocks it.
        assert receipt.state == "complete", receipt
        self.erased |= set(self.said[subject])
        self.unconsented -= set(self.said[subject])
        self.consented.discard(subject) if not self.gov.consent.is_granted(
            subject, "persist"
        ) else None

    @rule(subject=st.sampled_from(SUBJECTS))
    def export(self, subject: str) -> None:
        self.exports += 1
        out = self.tmp / f"export-{self.exports}"
        export_subject(self.gov, subject, out)
        text = "\n".join(
            p.read_text("utf-8", "replace") for p in sorted(out.rglob("*")) if p.is_file()
        )
        seen = {s for _, s in _tokens(text)}
        assert seen <= {subject}, f"{subject}'s export holds {seen - {subject}}"
        for path in out.rglob("*.json"):
            json.loads(path.read_text("utf-8"))  # well-formed

    # -- invariants --------------------------------------------------------

    @invariant()
    def nothing_unconsented_or_erased_is_readable_on_disk(self) -> None:
        on_disk = {t for t, _ in _tokens(self._disk_text())}
        leaked = on_disk & self.unconsented
        assert not leaked, f"said without consent, yet on disk: {sorted(leaked)}"
        kept = on_disk & self.erased
        assert not kept, f"erased, yet on disk: {sorted(kept)}"

    @invariant()
    def every_subject_memory_holds_its_subject_alone(self) -> None:
        agent = self.gov.store_factory(memory_md_path("Teller", self.gov.workspace), lambda: "")
        for store in agent.subject_stores():
            texts = [store.read_memory() or ""]
            texts += [store.read_archive(a) for a in store.list_archives()]
            subjects: set[str] = set()
            for text in texts:
                for record in parse_memory(text).records:
                    subjects |= record_subjects(record)
                    if LINEAGE_KEY in record.meta:
                        assert len(record.meta[LINEAGE_KEY]) == 1, record.meta
                    subjects |= {s for _, s in _tokens(record.content)}
            assert len(subjects) <= 1, f"{store.source()} holds {subjects}"
            store.close()
        for record in parse_memory(agent.read_memory() or "").records:
            assert not record_subjects(record), "the agent's own memory holds a subject's record"
        agent.close()

    @invariant()
    def live_summaries_hold_their_subject_alone(self) -> None:
        for owner, conversation in self.live.items():
            for message in conversation.conversation_history:
                lineage = message.get(LINEAGE_KEY)
                if lineage:
                    assert lineage == [owner], (owner, lineage)
                    seen = {s for _, s in _tokens(str(message["content"]))}
                    assert seen <= {owner}, (owner, seen)


class EncryptedIsolationMachine(IsolationMachine):
    def make_governance(self, workspace: Path, clock: FixedClock) -> Governance:
        from governed_memory._crypto._providers import InMemoryKeyProvider

        data = POLICY.model_dump(exclude={"source"}, mode="json")
        data["encryption"] = {"enabled": True}
        return Governance(
            workspace=workspace,
            policy=Policy.model_validate(data),
            clock=clock,
            key_provider=InMemoryKeyProvider(),
        )


TestIsolationMachine = IsolationMachine.TestCase
TestIsolationMachine.settings = settings(
    max_examples=40,
    stateful_step_count=20,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestEncryptedIsolationMachine = EncryptedIsolationMachine.TestCase
TestEncryptedIsolationMachine.settings = TestIsolationMachine.settings
