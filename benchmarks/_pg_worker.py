"""Cells of bench_postgres.py: N writers (threads or processes) of one target, N messages each.

Run as ``python _pg_worker.py <kind>`` by bench_postgres.py, one long-lived
worker per target, in the interpreter and environment of that target: ours
(``default``, ``regulated``) with the project's python and the target's
variables (``WORKSPACE_DIR``, ``GOVERNED_MEMORY_POLICY``, the keys, and for the
PostgreSQL rows ``GOVERNED_MEMORY_DATABASE_URL``: nothing else tells our code
where to store), LangGraph's (``langgraph-invoke``, ``langgraph-put``) with the
python of its own virtual environment and ``LANGGRAPH_DATABASE_URL``.

The worker imports its libraries once, prints ``{"ready": ...}`` (with the
package versions), then answers one JSON request per stdin line with one JSON
line. Each request runs in a child forked from the worker, so every cell starts
from the same state (no pool, thread or connection of an earlier cell) without
paying the imports again (LangGraph's take about 1.5 s); the worker itself
never opens a connection or starts a thread.

Requests:

* ``{"cell": {...}}``: ``tag`` (unique per cell: agent, customer and thread
  names), ``mode`` (``threads`` / ``processes``), ``writers``, ``messages``
  (per writer), ``one_agent`` (every writer on the first writer's agent and
  customer). Set-up and one warm write per writer happen before a barrier;
  then each writer writes its messages, timing every call. Reply: ``ops``
  (messages written after the barrier), ``seconds`` (from the first
  writer's start after the barrier to the last writer's end) and
  ``latencies`` (microseconds per call; a LangGraph invoke writes two
  messages per call).
* ``{"probe": {...}}`` (ours): one message through the same code, then where it
  went: ``{"stored_in": "database"}``, or ``{"unavailable": "<reason>"}``.
* ``{"setup": {}}`` (LangGraph): ``PostgresSaver.setup()`` once per database.
* ``{"warm": {"tag": ...}}``: a cell of one writer and two messages; the worker
  then imports every module that cell loaded, so later cells do not.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import multiprocessing
import os
import queue
import random
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

KIND = sys.argv[1] if len(sys.argv) > 1 else "default"
ACTOR = "dpo@bank.example"
VOCABULARY = (
    "account balance transfer savings current standing order card limit statement "
    "overdraft interest rate mortgage payment salary direct debit refund merchant "
    "dispute branch advisor loan term fixed variable monthly quarterly fee waiver "
    "reference beneficiary iban swift pending cleared blocked fraud alert travel "
    "notice address update phone verified identity document signature review please "
    "could you check whether the why is there when will my today tomorrow last week "
    "thanks again sorry for the confusion I see that it shows a second charge of "
    "EUR from and to our joint business personal"
)
WORDS = VOCABULARY.split()

Writer = Callable[[int], None]
"""Writes message ``i`` (a LangGraph invoke: messages ``i`` and ``i + 1``)."""


def message(writer: int, i: int, size: int = 400) -> str:
    """Message ``i`` of ``writer``: about ``size`` bytes of prose, the same in every target."""
    rng = random.Random(f"{writer}:{i}")
    words = [f"[{writer}:{i}]"]
    length = len(words[0])
    while length < size:
        word = rng.choice(WORDS)
        words.append(word)
        length += len(word) + 1
    return " ".join(words)[:size]


def texts(spec: dict[str, Any], n: int) -> dict[int, str]:
    """Writer ``n``'s messages by index, the warm ones (-2, -1) included, built before timing."""
    return {i: message(n, i) for i in range(-2, int(spec["messages"]) + 1)}


def role(i: int) -> str:
    return "user" if i % 2 == 0 else "assistant"


def names(spec: dict[str, Any], n: int) -> tuple[str, str]:
    """(agent, customer) of writer ``n`` in this cell."""
    owner = 0 if spec.get("one_agent") else n
    return f"{spec['tag']}-agent-{owner}", f"{spec['tag']}-customer-{owner}"


# -- ours ------------------------------------------------------------------------------


def _default(spec: dict[str, Any]) -> tuple[Callable[[], None], Callable[[int], Writer]]:
    """Default mode: a Conversation as the reference is used (no governance argument).

    With ``GOVERNED_MEMORY_DATABASE_URL`` set, the process's shared Governance
    (default policy) stores it in the database; without it, MEMORY.md.
    """
    from governed_memory import Conversation, memory_md_path

    def make(n: int) -> Writer:
        agent, _ = names(spec, n)
        conversation = Conversation(
            name=agent, time_enabled=True, memory_md_path=memory_md_path(agent)
        )
        text = texts(spec, n)
        return lambda i: conversation.add(role(i), text[i])  # type: ignore[func-returns-value]

    return (lambda: None), make


def _regulated(spec: dict[str, Any]) -> tuple[Callable[[], None], Callable[[int], Writer]]:
    """policies/regulated.toml as shipped (``GOVERNED_MEMORY_POLICY=regulated``), consent granted.

    Encryption, subject isolation, audit, ``durability.sync = "commit"``; one
    Governance per process (as ``shared_governance`` gives), one conversation
    per writer, each its own agent and customer (or all on the first's).
    """
    from governed_memory import Conversation, Governance, memory_md_path

    def grant() -> None:
        setup = Governance()
        for n in range(int(spec["writers"])):
            _, customer = names(spec, n)
            setup.grant(customer, "persist", actor=ACTOR)

    shared: dict[str, Any] = {}
    making = threading.Lock()  # the writers' threads make their conversations at once

    def make(n: int) -> Writer:
        with making:
            gov = shared.get("gov")
            if gov is None or shared.get("pid") != os.getpid():
                gov = shared["gov"] = Governance()
                shared["pid"] = os.getpid()
        agent, customer = names(spec, n)
        conversation = Conversation(
            name=agent, governance=gov, memory_md_path=memory_md_path(agent), subject_id=customer
        )
        text = texts(spec, n)
        return lambda i: conversation.add(role(i), text[i])  # type: ignore[func-returns-value]

    return grant, make


def _database_rows(url: str) -> int:
    """Rows in the backend's tables (schema governed_memory), its version table aside."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = "
            "'governed_memory' AND table_type = 'BASE TABLE' AND table_name <> 'schema_version'"
        ).fetchall()
        total = 0
        for (table,) in tables:
            got = conn.execute(f'SELECT count(*) FROM governed_memory."{table}"').fetchone()
            total += int(got[0]) if got else 0
        return total


def probe(spec: dict[str, Any]) -> dict[str, Any]:
    """One message through this target's code: did it reach the database, and only it?"""
    url = os.environ.get("GOVERNED_MEMORY_DATABASE_URL", "")
    before = _database_rows(url)
    grant, make = TARGETS[KIND](spec)
    try:
        grant()
        make(0)(0)
    except Exception as exc:  # the reason, in one line, is the probe's answer
        line = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        return {"unavailable": f"{type(exc).__name__}: {line}"}
    workspace = Path(os.environ["WORKSPACE_DIR"])
    local = sorted(str(p.relative_to(workspace)) for p in workspace.rglob("*.md"))
    if local:
        return {
            "unavailable": f"the message went to the local disk ({local[0]}), not to the "
            "database: this build does not use GOVERNED_MEMORY_DATABASE_URL"
        }
    if _database_rows(url) <= before:
        return {"unavailable": "the message reached neither the local disk nor the database"}
    return {"stored_in": "database"}


# -- LangGraph ---------------------------------------------------------------------------


def _langgraph_invoke(spec: dict[str, Any]) -> tuple[Callable[[], None], Callable[[int], Writer]]:
    """A compiled StateGraph(MessagesState) on PostgresSaver: one invoke per turn.

    The user's message goes in, the node answers with the assistant's message
    (both stored in the thread's state, as a chat turn is); one thread per
    writer, each writer its own PostgresSaver on its own connection.
    """
    from langchain_core.messages import AIMessage, HumanMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    url = os.environ["LANGGRAPH_DATABASE_URL"]

    def make(n: int) -> Writer:
        saver = open_saver(url)
        reply: list[str] = [""]
        graph = StateGraph(MessagesState)
        graph.add_node("answer", lambda state: {"messages": [AIMessage(reply[0])]})
        graph.add_edge(START, "answer")
        graph.add_edge("answer", END)
        app = graph.compile(checkpointer=saver)
        agent, _ = names(spec, n)
        config: Any = {"configurable": {"thread_id": agent}}
        text = texts(spec, n)

        def write(i: int) -> None:
            reply[0] = text[i + 1]
            app.invoke({"messages": [HumanMessage(text[i])]}, config)

        STORED[n] = lambda: len(app.get_state(config).values["messages"])
        return write

    return (lambda: None), make


def _langgraph_put(spec: dict[str, Any]) -> tuple[Callable[[], None], Callable[[int], Writer]]:
    """PostgresSaver.put per message: the checkpoint a MessagesState thread stores for it.

    The floor under the graph: no graph, no reads, one checkpoint per message
    whose ``messages`` channel holds the thread's messages so far (what
    LangGraph's channel stores at each new version), one writer per saver.
    """
    from langchain_core.messages import AIMessage, BaseMessage, HumanMessage
    from langgraph.checkpoint.base import empty_checkpoint

    url = os.environ["LANGGRAPH_DATABASE_URL"]

    def make(n: int) -> Writer:
        saver = open_saver(url)
        agent, _ = names(spec, n)
        state: dict[str, Any] = {
            "config": {"configurable": {"thread_id": agent, "checkpoint_ns": ""}},
            "version": None,
            "messages": [],
        }
        text = texts(spec, n)

        def write(i: int) -> None:
            kind = HumanMessage if i % 2 == 0 else AIMessage
            messages: list[BaseMessage] = state["messages"]
            messages.append(kind(text[i]))
            version = saver.get_next_version(state["version"], None)
            checkpoint = empty_checkpoint()
            checkpoint["channel_values"] = {"messages": list(messages)}
            checkpoint["channel_versions"] = {"messages": version}
            metadata: Any = {"source": "update", "step": i, "parents": {}}
            state["config"] = saver.put(
                state["config"], checkpoint, metadata, {"messages": version}
            )
            state["version"] = version

        def stored() -> int:
            saved = saver.get_tuple(state["config"])
            return len(saved.checkpoint["channel_values"]["messages"]) if saved else 0

        STORED[n] = stored
        return write

    return (lambda: None), make


_OPEN: list[Any] = []


def open_saver(url: str) -> Any:
    """A PostgresSaver on a connection of its own, open until the process ends."""
    from langgraph.checkpoint.postgres import PostgresSaver

    context = PostgresSaver.from_conn_string(url)
    _OPEN.append(context)  # its generator closes the connection when collected
    return context.__enter__()


def setup_langgraph() -> dict[str, Any]:
    from langgraph.checkpoint.postgres import PostgresSaver

    with PostgresSaver.from_conn_string(os.environ["LANGGRAPH_DATABASE_URL"]) as saver:
        saver.setup()
    return {"ok": True}


TARGETS = {
    "default": _default,
    "regulated": _regulated,
    "langgraph-invoke": _langgraph_invoke,
    "langgraph-put": _langgraph_put,
}
STEP = {"langgraph-invoke": 2}  # messages per write call
STORED: dict[int, Callable[[], int]] = {}
"""Writer -> how many messages its thread holds, read back (LangGraph's targets)."""
WARM = {"langgraph-invoke": 2, "langgraph-put": 1}  # messages of the warm write


# -- a cell ---------------------------------------------------------------------------------


def _run(n: int, make: Callable[[int], Writer], count: int, barrier: Any, out: Any) -> None:
    step = STEP.get(KIND, 1)
    try:
        write = make(n)
        write(-2)  # warm: connections, keys, files, caches (messages of its own)
        barrier.wait()
        begin = time.monotonic()
        latencies = []
        for i in range(0, count, step):
            start = time.perf_counter()
            write(i)
            latencies.append(round((time.perf_counter() - start) * 1e6))
        end = time.monotonic()
        if n in STORED and STORED[n]() != count + WARM[KIND]:
            raise RuntimeError(
                f"writer {n}'s thread holds {STORED[n]()} messages, not {count + WARM[KIND]}"
            )
        out.put({"ops": count, "begin": begin, "end": end, "latencies": latencies})
    except Exception:
        barrier.abort()
        out.put({"error": traceback.format_exc()})


def cell(spec: dict[str, Any]) -> dict[str, Any]:
    writers, count = int(spec["writers"]), int(spec["messages"])
    grant, make = TARGETS[KIND](spec)
    ctx = multiprocessing.get_context("fork")
    processes = spec["mode"] == "processes"
    # Set-up that writes (consent grants) runs in a child of its own, so this
    # process opens no connection pool before it forks the writers.
    child = ctx.Process(target=grant)
    child.start()
    child.join()
    if child.exitcode != 0:
        raise RuntimeError(f"the set-up (consent grants) failed with exit code {child.exitcode}")
    barrier = (ctx.Barrier if processes else threading.Barrier)(writers + 1)
    results: Any = ctx.Queue() if processes else queue.Queue()
    workers: list[Any] = [
        (ctx.Process if processes else threading.Thread)(
            target=_run, args=(n, make, count, barrier, results)
        )
        for n in range(writers)
    ]
    for worker in workers:
        worker.start()
    with contextlib.suppress(threading.BrokenBarrierError):
        barrier.wait(timeout=300)
    done = [results.get(timeout=600) for _ in workers]
    for worker in workers:
        worker.join()
    errors = [d["error"] for d in done if "error" in d]
    if errors:
        # The writer that failed first, not those its abort of the barrier stopped.
        root = [e for e in errors if "BrokenBarrierError" not in e] or errors
        lines = [ln for ln in root[0].splitlines() if ln.strip()]
        return {"error": lines[-1].strip(), "trace": root[0]}
    return {
        "ops": sum(d["ops"] for d in done),
        "seconds": max(d["end"] for d in done) - min(d["begin"] for d in done),
        "latencies": [x for d in done for x in d["latencies"]],
    }


def answer(request: dict[str, Any]) -> dict[str, Any]:
    if "cell" in request:
        return cell(request["cell"])
    if "probe" in request:
        return probe(request["probe"])
    if "setup" in request:
        return setup_langgraph()
    if "warm" in request:
        return warm(request["warm"])
    raise ValueError(f"unknown request {sorted(request)}")


def serve_one(request: dict[str, Any]) -> dict[str, Any]:
    """Answer ``request`` in a forked child; its reply (or its error) through a pipe."""
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            reply = answer(request)
        except Exception as exc:
            reply = {"error": f"{type(exc).__name__}: {exc}", "trace": traceback.format_exc()}
        with os.fdopen(write, "w") as pipe:
            json.dump(reply, pipe)
        os._exit(0)  # the writers' threads and pools hold nothing that needs tearing down
    os.close(write)
    with os.fdopen(read) as pipe:
        text = pipe.read()
    _, status = os.waitpid(pid, 0)
    if not text:
        return {"error": f"the cell's process died (wait status {status})"}
    return dict(json.loads(text))


def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    found = {}
    for name in (
        "governed-memory",
        "langgraph",
        "langgraph-checkpoint",
        "langgraph-checkpoint-postgres",
        "langchain-core",
        "psycopg",
        "psycopg-pool",
    ):
        with contextlib.suppress(PackageNotFoundError):
            found[name] = version(name)
    return found


def preload() -> None:
    """Import what a cell uses, once, in the worker (its children inherit the modules)."""
    if KIND.startswith("langgraph"):
        import langchain_core.messages  # noqa: F401
        import langgraph.checkpoint.postgres
        import langgraph.graph  # noqa: F401

        return
    import governed_memory

    for name in ("Conversation", "Governance", "memory_md_path"):
        getattr(governed_memory, name)


def warm(spec: dict[str, Any]) -> dict[str, Any]:
    """A small cell, then the modules it loaded.

    Building the first Conversation imports most of the package lazily, half a
    second per process; the worker imports them once instead. A target that does
    not work says so in its probe, not here.
    """
    with contextlib.suppress(Exception):
        cell({"mode": "threads", "writers": 1, "messages": 2, "one_agent": False, **spec})
    return {"modules": sorted(m for m in sys.modules if not m.startswith("__"))}


def load(modules: list[str]) -> None:
    for name in modules:
        if name not in sys.modules:
            with contextlib.suppress(Exception):
                importlib.import_module(name)


def main() -> None:
    preload()
    print(json.dumps({"ready": KIND, "versions": versions()}), flush=True)
    for line in sys.stdin:
        if line.strip():
            reply = serve_one(json.loads(line))
            load(reply.pop("modules", []))
            print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    main()
