"""Workspaces for the rectification tests: a record quoted by a summary, on every store kind."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from subjects_helpers import all_bytes, conversation, governance

from governed_memory import FixedClock, Governance
from governed_memory._memory import ExtractiveSummarizer
from governed_memory._policy._model import DEFAULT_POLICY, Policy
from governed_memory._protocols import Transcript

OLD = "My IBAN is DE00 1111 2222 3333 and I bank in Berlin."
NEW = "My IBAN is DE99 9999 8888 7777 and I bank in Hamburg."
OLD_NEEDLE = "DE00 1111"


def policy(**sections: dict[str, Any]) -> Policy:
    """The default policy with some sections' keys changed."""
    data = DEFAULT_POLICY.model_dump(exclude={"source"}, mode="json")
    for name, values in sections.items():
        data[name] = {**data[name], **values}
    return Policy.model_validate(data)


def workspace_with(
    workspace: Path,
    clock: FixedClock,
    *,
    kind: str = "plaintext",
    on_rectify: str = "mark",
    isolated: bool = False,
    audit_key: str | None = None,
    **sections: dict[str, Any],
) -> Governance:
    """Agent A: alice's OLD record and bob's, compacted by the extractive summarizer, then more.

    The summary quotes OLD (the extractive summarizer selects sentences), so
    it is derived from the record; under ``isolated`` everything is in
    alice's own subject memory (bob speaks in his).
    """
    sections.setdefault("summarization", {"on_rectify": on_rectify})
    chosen = policy(memory={"isolation": "subject" if isolated else "agent"}, **sections)
    if audit_key is None:
        gov = governance(workspace, clock, chosen, kind=kind)
    else:
        from governed_memory import Settings
        from governed_memory._crypto._providers import InMemoryKeyProvider

        encrypted = kind == "encrypted"
        if encrypted:
            chosen = policy(
                memory={"isolation": "subject" if isolated else "agent"},
                encryption={"enabled": True},
                **sections,
            )
        gov = Governance(
            workspace=workspace,
            policy=chosen,
            clock=clock,
            settings=Settings(audit_key=audit_key),
            key_provider=InMemoryKeyProvider() if encrypted else None,
        )
    conv = conversation(gov, "A", **({"subject_id": "alice"} if isolated else {}))
    conv.add("Human", OLD, subject_id="alice")
    conv.add("AI", "Noted, thank you for the banking details.", subject_id="alice")
    if not isolated:
        conv.add("Human", "bob asks about opening hours on Saturday.", subject_id="bob")
    summary = ExtractiveSummarizer().summarize(
        Transcript(text=conv.return_history_as_string(), messages=conv.conversation_history),
        max_tokens=400,
    )
    assert OLD in summary  # the summary really quotes the record
    conv.compact("[Compressed Memory Summary]\n" + summary)
    conv.add("Human", "alice asks a later question about cards.", subject_id="alice")
    conv.store.close()  # type: ignore[union-attr]
    if isolated:
        bob = conversation(gov, "A", subject_id="bob")
        bob.add("Human", "bob note in his own memory.", subject_id="bob")
        bob.store.close()  # type: ignore[union-attr]
    return gov


def memories_text(gov: Governance) -> str:
    """Every memory's and archive's decrypted text (subject memories too)."""
    parts: list[str] = []
    agents = gov.workspace / "agents"
    for folder in sorted(agents.iterdir()) if agents.is_dir() else []:
        store = gov.store_factory(folder / "MEMORY.md", lambda: "")
        for memory in [store, *store.subject_stores()]:
            parts.append(memory.read_memory() or "")
            parts.extend(memory.read_archive(a) for a in memory.list_archives())
            memory.close()
    return "\n".join(parts)


def everything_on_disk(gov: Governance) -> str:
    """Every byte under the workspace (hidden and temporary files too) plus the decrypted text."""
    raw = [b.decode("utf-8", "replace") for b in all_bytes(gov.workspace).values()]
    return "\n".join([*raw, memories_text(gov)])
