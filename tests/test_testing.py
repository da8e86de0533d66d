"""governed_memory.testing: the shipped fakes behave like the real collaborators, and stay light."""

from __future__ import annotations

import datetime as dt
import hashlib
import inspect
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

import governed_memory
from governed_memory import (
    Conversation,
    FixedClock,
    Governance,
    PlaintextAgentStore,
    Policy,
    StorageError,
    memory_md_path,
)
from governed_memory._format import render_block, render_header
from governed_memory._records import HoldRegistry
from governed_memory.testing import (
    InMemoryAgentStore,
    InMemoryStores,
    RecordingAuditSink,
    SeededRandom,
)
from governed_memory.testing import __all__ as testing_all

DOC = Path(__file__).resolve().parent.parent / "docs" / "testing.md"
T0 = dt.datetime(2026, 11, 30, 10, 0, 0)
HEAVY = ("apscheduler", "cryptography", "litellm", "opentelemetry", "pydantic", "tiktoken")


def _header() -> str:
    return render_header("conv", "2026-11-30T10:00:00")


def _block(text: str) -> str:
    return render_block("User", "2026-11-30T10:00:01", text, None)


def _fresh_python(code: str) -> Any:
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


# -- the module ----------------------------------------------------------------


def test_all_is_sorted_and_every_name_resolves() -> None:
    assert testing_all == sorted(set(testing_all))
    for name in testing_all:
        assert getattr(governed_memory.testing, name) is not None


def test_re_exported_fakes_are_the_package_objects() -> None:
    assert governed_memory.testing.FixedClock is governed_memory.FixedClock
    assert governed_memory.testing.InMemoryKeyProvider is governed_memory.InMemoryKeyProvider


def test_importing_it_and_using_the_light_fakes_loads_no_heavy_dependency(tmp_path: Path) -> None:
    """A default-mode test with the in-memory store, the sink and the seeded source stays light."""
    loaded = _fresh_python(
        f"""
        import json, sys
        from governed_memory import Conversation, memory_md_path
        from governed_memory.testing import (
            FixedClock, InMemoryStores, RecordingAuditSink, SeededRandom,
        )
        stores = InMemoryStores(clock=FixedClock())
        path = memory_md_path("Light", {str(tmp_path)!r})
        conversation = Conversation(memory_md_path=path, store_factory=stores)
        conversation.add("User", "hello")
        conversation.compact("a summary")
        RecordingAuditSink().record("persist", agent=None, subject_id=None, outcome="ok")
        SeededRandom()(16)
        print(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))
        """
    )
    assert loaded == []


def test_the_key_provider_loads_cryptography_only_when_asked_for() -> None:
    loaded = _fresh_python(
        """
        import json, sys
        import governed_memory.testing as testing
        before = "cryptography" in sys.modules
        testing.InMemoryKeyProvider
        print(json.dumps([before, "cryptography" in sys.modules]))
        """
    )
    assert loaded == [False, True]


def test_dir_lists_the_lazy_names_before_they_are_used() -> None:
    assert set(testing_all) <= set(dir(governed_memory.testing))


# -- RecordingAuditSink --------------------------------------------------------


def test_sink_keeps_each_call_as_one_flat_dict_in_order() -> None:
    sink = RecordingAuditSink()
    sink.record("persist", agent="A", subject_id="alice", outcome="ok", policy_id="p")
    sink.record("persist", agent="A", subject_id=None, outcome="denied")
    sink.record("purge", agent=None, subject_id=None, outcome="error", error="OSError")
    assert sink.records[0] == {
        "operation": "persist",
        "agent": "A",
        "subject_id": "alice",
        "outcome": "ok",
        "policy_id": "p",
    }
    assert sink.events() == [("persist", "ok"), ("persist", "denied"), ("purge", "error")]
    assert [r["outcome"] for r in sink.of("persist")] == ["ok", "denied"]
    assert sink.outcomes("purge") == ["error"] and sink.outcomes("compact") == []
    sink.clear()
    assert sink.records == [] and sink.events() == []


def test_sink_has_the_audit_sink_signature() -> None:
    from governed_memory import AuditSink

    expected = inspect.signature(AuditSink.record)
    assert inspect.signature(RecordingAuditSink.record).parameters.keys() == (
        expected.parameters.keys()
    )


def test_sink_records_what_governance_audits(workspace: Path) -> None:
    sink = RecordingAuditSink()
    policy = Policy.model_validate({"policy": {"id": "kit", "version": "7"}})
    gov = Governance(workspace=workspace, policy=policy, clock=FixedClock(T0), audit=sink)
    conversation = Conversation(
        name="c", memory_md_path=memory_md_path("A", workspace), governance=gov
    )
    conversation.add("User", "hello", subject_id="alice")
    [persist] = sink.of("persist")
    assert persist["agent"] == "A" and persist["subject_id"] == "alice"
    assert persist["outcome"] == "ok"
    assert (persist["policy_id"], persist["policy_version"]) == ("kit", "7")


# -- InMemoryAgentStore ---------------------------------------------------------


def _both(tmp_path: Path) -> list[Any]:
    """A plaintext store and an in-memory store on the same path, clocks alike."""
    path = memory_md_path("A", tmp_path)
    return [
        PlaintextAgentStore(path, _header, clock=FixedClock(T0)),
        InMemoryStores(clock=FixedClock(T0))(path, _header),
    ]


def _observe(store: Any) -> tuple[str | None, list[str], list[str]]:
    archives = store.list_archives()
    return (
        store.read_memory(),
        [Path(store.source(a)).name for a in archives],
        [store.read_archive(p) for p in archives],
    )


def test_the_in_memory_store_reads_back_what_the_plaintext_store_does(tmp_path: Path) -> None:
    """Same calls, same clock: the same memory text, archive names and archive texts."""
    seen = []
    for store in _both(tmp_path):
        assert store.read_memory() is None
        store.ensure()
        store.append(_block("one"))
        store.append(_block("two"))
        first = store.compact(_block("summary"))
        second = store.compact(None)  # memory holds the summary block: archived again
        third = store.compact(None)  # only a header now: no archive
        store.append(_block("three"))
        assert first is not None and second is not None and third is None
        assert (
            Path(store.source(first)).parent == Path(store.source(second)).parent == Path("archive")
        )
        seen.append(_observe(store))
    assert seen[0] == seen[1]
    assert seen[1][1] == ["history_2026-11-30_10-00-00.md", "history_2026-11-30_10-00-00_000001.md"]


@given(st.lists(st.text(min_size=1), max_size=5))
def test_appended_text_is_kept_exactly(blocks: list[str]) -> None:
    store = InMemoryStores()(Path("/nowhere/agents/A/MEMORY.md"), _header)
    store.ensure()
    for block in blocks:
        store.append(block)
    assert store.read_memory() == _header() + "".join(blocks)
    archive = store.compact("fresh")
    assert store.read_memory() == _header() + "fresh"
    if archive is not None:
        assert store.read_archive(archive) == _header() + "".join(blocks)


def test_rewrite_replaces_memory_and_archives_and_refuses_anything_else(tmp_path: Path) -> None:
    store = InMemoryStores(clock=FixedClock(T0))(memory_md_path("A", tmp_path), _header)
    with pytest.raises(StorageError, match="does not exist"):
        store.rewrite_memory("x")
    store.append(_block("secret"))
    archive = store.compact(None)
    assert archive is not None
    with store.lock(), store.lock():  # re-entrant, like the file stores' lock
        store.rewrite_archive(archive, _header())
        store.rewrite_memory(_header() + _block("kept"))
    assert store.read_archive(archive) == _header()
    assert store.read_memory() == _header() + _block("kept")
    for foreign in (str(tmp_path / "elsewhere.md"), "history_unknown"):
        with pytest.raises(StorageError, match="refused"):
            store.rewrite_archive(foreign, "x")
    with pytest.raises(StorageError, match="no such archive"):
        store.read_archive("history_unknown")


def test_stores_on_one_path_share_text_and_nothing_touches_the_disk(tmp_path: Path) -> None:
    stores = InMemoryStores(clock=FixedClock(T0))
    path = memory_md_path("A", tmp_path)
    first = Conversation(name="c", memory_md_path=path, store_factory=stores)
    first.add("User", "hello")
    first.compact("the summary")
    again = Conversation(name="c", memory_md_path=path, store_factory=stores)
    assert "the summary" in again.conversation_history[0]["content"]
    assert isinstance(again.store, InMemoryAgentStore)
    assert stores.memory(path) == again.store.read_memory()
    [archived] = stores.archives(path)
    assert "hello" in archived
    assert list(tmp_path.iterdir()) == []
    assert stores.memory(memory_md_path("B", tmp_path)) is None
    assert stores.archives(memory_md_path("B", tmp_path)) == []


# -- SeededRandom --------------------------------------------------------------


def test_seeded_bytes_are_sha256_in_counter_mode_whatever_the_chunking() -> None:
    """The algorithm the encryption-v1 known-answer fixture was made with."""
    seed = b"pinned"
    stream = b"".join(hashlib.sha256(seed + n.to_bytes(8, "big")).digest() for n in range(3))
    source = SeededRandom(seed)
    assert source(5) + source(40) + source(3) == stream[:48]
    assert SeededRandom(seed)(48) == stream[:48]
    assert SeededRandom(b"other")(48) != stream[:48]


def test_seeded_ids_pin_hold_ids(tmp_path: Path) -> None:
    expected = "hold-" + SeededRandom(b"holds")(4).hex()
    holds = HoldRegistry(tmp_path, id_factory=SeededRandom(b"holds").ids("hold-"))
    hold = holds.place(agent="A", reason="case 1", actor="legal")
    assert hold.id == expected == SeededRandom(b"holds").ids("hold-")()
    assert re.fullmatch(r"hold-[0-9a-f]{8}", hold.id)
    assert SeededRandom().hex(2) == SeededRandom()(2).hex()


# -- docs/testing.md -----------------------------------------------------------


def _examples() -> dict[str, str]:
    text = DOC.read_text(encoding="utf-8")
    return dict(re.findall(r"<!-- example: ([\w-]+) -->\n```python\n(.*?)```", text, re.S))


def test_the_page_has_its_examples() -> None:
    assert set(_examples()) == {
        "audit-sink",
        "fixed-clock",
        "in-memory-store",
        "key-provider",
        "seeded-random",
    }


@pytest.mark.parametrize("name", sorted(_examples()))
def test_each_documented_example_passes(name: str, tmp_path: Path) -> None:
    """Every example defines pytest tests; each one runs and passes here."""
    namespace: dict[str, Any] = {}
    exec(compile(_examples()[name], f"{DOC}:{name}", "exec"), namespace)
    tests = {k: v for k, v in namespace.items() if k.startswith("test_") and callable(v)}
    assert tests, f"example {name!r} defines no test function"
    for index, (test_name, function) in enumerate(sorted(tests.items())):
        arguments = {}
        if "tmp_path" in inspect.signature(function).parameters:
            arguments["tmp_path"] = tmp_path / f"{index}-{test_name}"
            arguments["tmp_path"].mkdir()
        function(**arguments)
