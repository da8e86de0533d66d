"""Append throughput and latency with 1, 4 and 16 writers: files, PostgreSQL, LangGraph's PostgresSaver.

Usage (from the repository root, in the project's virtual environment):

    python benchmarks/bench_postgres.py [--rounds 3] [--messages 30] [--writers 1,4,16]

Every writer appends ``--messages`` messages (about 400 bytes of prose each,
roles alternating user / assistant; message ``i`` of writer ``w`` is the same
text in every target), timing each call; writers are threads of one process,
then processes. Targets, all in one run and against one server:

* ``files, default mode``: ``Conversation(name, time_enabled=True,
  memory_md_path=...)`` without governance, as the reference is used: MEMORY.md,
  no fsync per add;
* ``files, encrypted+audited``: the same writer under ``policies/regulated.toml``
  as shipped (``GOVERNED_MEMORY_POLICY=regulated``: consent required and granted,
  encryption, subject isolation, audit, ``durability.sync = "commit"``), one
  Governance per process, each writer its own agent and customer;
* ``postgres, plaintext`` and ``postgres, encrypted+audited``: the very same two
  writers, run in processes that have ``GOVERNED_MEMORY_DATABASE_URL`` set, on
  a database prepared with ``governed-memory db upgrade``. Nothing else tells
  our code where to store: the rows depend only on the public configuration.
  Before each of them is measured, a probe writes one message and checks that
  it reached the database and nothing reached the local disk; when the upgrade
  or the probe fails (a build without the backend), the row says ``not
  available: <reason>`` and the run goes on;
* ``LangGraph invoke``: what a LangGraph application does per chat turn, and so
  the yardstick of the targets: a compiled ``StateGraph(MessagesState)`` with
  the ``PostgresSaver`` checkpointer, one ``invoke`` per turn carrying the
  user's message in, its one node answering with the assistant's message, so
  each invoke stores two of the writer's messages (counted as two). One
  ``thread_id`` per writer, and each writer its own ``PostgresSaver`` on its own
  connection (``from_conn_string``, autocommit, as documented): a saver holds a
  ``threading.Lock`` across every query, so writers sharing one would be
  serialised by LangGraph, not by the database. Default durability
  (``"async"``): ``invoke`` still returns only after every checkpoint and write
  of the run is committed (its executor waits for them on exit). Per invoke
  PostgresSaver (langgraph-checkpoint-postgres 3.2) reads the thread's latest
  checkpoint with its blobs and writes three checkpoints (input, after the
  input, after the node), each one transaction (an ``INSERT ... ON CONFLICT``
  of the checkpoint row plus, when the ``messages`` channel changed, its whole
  value as one msgpack blob in ``checkpoint_blobs``: ``MessagesState`` keeps
  every message of the thread in that one channel, so the blob grows with the
  thread), and the tasks' writes (``checkpoint_writes``): about six commits.
  ``setup()`` runs once per database (its migrations create the three tables
  and their indexes);
* ``LangGraph put``: the floor under that: one ``PostgresSaver.put`` per message,
  the checkpoint a ``MessagesState`` thread stores for it (the thread's messages
  so far in the ``messages`` channel, a new channel version), no graph and no
  reads: one transaction per message.

Then the variant ``several writers on ONE agent`` (4 and 16 writers, ours
only): every writer its own Conversation on the first writer's agent and
customer, as several pods serving one agent. LangGraph has no row there: a
thread has no concurrent writers (two invokes at once fork its checkpoints).

Each target runs in a long-lived worker (benchmarks/_pg_worker.py) of its own
interpreter and environment: ours in this one, LangGraph in its own virtual
environment at ``--langgraph-venv`` (default .cache/bench-envs/langgraph, created
with the pinned ``LANGGRAPH_REQUIREMENTS`` on first use and reused while they
match). Each cell (target, threads/processes, writers) runs in a child forked
from that worker: set-up and one warm write per writer, a barrier, then the
timed messages; throughput is the messages written over the time from the
first writer's start after the barrier to the last writer's end, latency the
time of each call (a LangGraph invoke: one turn, two messages). The rounds alternate the targets, their order
rotated each round; tables give the median msg/s of the rounds with the spread,
and p50 / p99 of every call of every round.

The server is a throw-away PostgreSQL cluster (tests/pg_server.py's PgServer:
a Unix socket and 127.0.0.1 only) with ``fsync``, ``full_page_writes`` and
``synchronous_commit`` on, and the default ``shared_buffers``; it and every
scratch file are removed at the end. Nothing touches the network except the
one-time ``pip install`` of LangGraph.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_add import table, venv_python  # the benchmarks' one table printer

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
WORKER = HERE / "_pg_worker.py"
sys.path.insert(0, str(ROOT / "tests"))
from pg_server import PgServer  # noqa: E402  (the tests' throw-away server)

LANGGRAPH_REQUIREMENTS = {
    "langgraph": "1.2.24",
    "langgraph-checkpoint": "4.3.2",
    "langgraph-checkpoint-postgres": "3.2.0",
    "langchain-core": "1.8.3",
    "psycopg": "3.3.9",
    "psycopg-pool": "3.3.3",
}
"""The versions measured (psycopg with its binary build)."""

MASTER_KEY = "AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8="  # base64 of bytes 0..31
AUDIT_KEY = "ab" * 32
MODES = ("threads", "processes")
FAILURES = Path(tempfile.gettempdir()) / "bench_postgres.failures"
"""Where the tracebacks of failed cells go (appended, kept after the run)."""


@dataclass(frozen=True)
class Target:
    key: str
    label: str
    kind: str  # the worker's code: default, regulated, langgraph-invoke, langgraph-put
    backend: str  # files, postgres, langgraph
    database: str | None = None

    @property
    def ours(self) -> bool:
        return self.backend != "langgraph"

    @property
    def per_call(self) -> int:
        """Messages per write call (a LangGraph invoke is a turn: two)."""
        return 2 if self.kind == "langgraph-invoke" else 1


TARGETS = (
    Target("files-plain", "files, default mode", "default", "files"),
    Target("files-regulated", "files, encrypted+audited", "regulated", "files"),
    Target("pg-plain", "postgres, plaintext", "default", "postgres", "gm_plain"),
    Target("pg-regulated", "postgres, encrypted+audited", "regulated", "postgres", "gm_regulated"),
    Target("langgraph-invoke", "LangGraph invoke", "langgraph-invoke", "langgraph", "lg_invoke"),
    Target("langgraph-put", "LangGraph put", "langgraph-put", "langgraph", "lg_put"),
)
BY_KEY = {t.key: t for t in TARGETS}


# -- LangGraph's virtual environment ------------------------------------------------------


def installed_versions(python: Path) -> dict[str, str]:
    if not python.exists():
        return {}
    probe = subprocess.run(
        [
            str(python),
            "-c",
            "import json, importlib.metadata as m\n"
            f"names = {sorted(LANGGRAPH_REQUIREMENTS)!r}\n"
            "found = {}\n"
            "for n in names:\n"
            "    try: found[n] = m.version(n)\n"
            "    except m.PackageNotFoundError: pass\n"
            "print(json.dumps(found))",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    return dict(json.loads(probe.stdout)) if probe.returncode == 0 else {}


def install_langgraph(venv: Path) -> Path:
    """The python of ``venv`` with the pinned LangGraph packages, installed on first use."""
    python = venv_python(venv)
    if installed_versions(python) == LANGGRAPH_REQUIREMENTS:
        return python
    pins = [
        f"{name}[binary,pool]=={v}" if name == "psycopg" else f"{name}=={v}"
        for name, v in LANGGRAPH_REQUIREMENTS.items()
    ]
    print(f"Installing {' '.join(pins)} into {venv} (once; about a minute)...", file=sys.stderr)
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "--quiet", *pins], check=True)
    got = installed_versions(python)
    if got != LANGGRAPH_REQUIREMENTS:
        sys.exit(
            f"bench_postgres: {venv} has {got} after the install, not {LANGGRAPH_REQUIREMENTS}"
        )
    return python


# -- the environment ------------------------------------------------------------------------


def fdatasync_ms(folder: Path, count: int = 200) -> tuple[float, float]:
    """Median and p99 ms of a 400-byte append plus fdatasync in ``folder``."""
    path = folder / "fdatasync.probe"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    times = []
    try:
        for _ in range(count):
            start = time.perf_counter()
            os.write(fd, b"x" * 400)
            os.fdatasync(fd)
            times.append((time.perf_counter() - start) * 1e3)
    finally:
        os.close(fd)
        path.unlink()
    return statistics.median(times), percentile(times, 99)


def percentile(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(p / 100 * (len(ordered) - 1)))]


def start_server() -> PgServer:
    """A throw-away cluster as the tests have, with durability on (the tests turn it off)."""
    server = PgServer()
    with open(server.data / "postgresql.conf", "a", encoding="utf-8") as conf:
        conf.write(
            "fsync = on\nfull_page_writes = on\nsynchronous_commit = on\nshared_buffers = 128MB\n"
        )
    server.restart()
    return server


def server_facts(server: PgServer) -> str:
    import psycopg

    with psycopg.connect(server.url(), autocommit=True) as conn:
        values = [
            conn.execute(f"SHOW {name}").fetchone()
            for name in ("server_version", "fsync", "synchronous_commit", "wal_sync_method")
        ]
    version, fsync, commit, method = (v[0] if v else "?" for v in values)
    return f"PostgreSQL {version} (fsync={fsync}, synchronous_commit={commit}, {method})"


def database_bytes(server: PgServer, database: str) -> int:
    import psycopg

    with psycopg.connect(server.url(), autocommit=True) as conn:
        row = conn.execute("SELECT pg_database_size(%s)", (database,)).fetchone()
        return int(row[0]) if row else 0


def governed_memory_cli() -> list[str]:
    script = Path(sys.executable).with_name("governed-memory")
    if script.exists():
        return [str(script)]
    return [sys.executable, "-c", "from governed_memory._cli import main; main()"]


# -- workers ------------------------------------------------------------------------------------


@dataclass
class Worker:
    """One target's long-lived worker (benchmarks/_pg_worker.py)."""

    target: Target
    python: Path
    home: Path
    env: dict[str, str]
    versions: dict[str, str] = field(default_factory=dict)
    proc: subprocess.Popen[str] | None = field(default=None, repr=False)

    def start(self) -> None:
        self.proc = subprocess.Popen(
            [str(self.python), str(WORKER), self.target.kind],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(self.home / "worker.log", "w"),  # noqa: SIM115 (the child owns it)
            text=True,
            cwd=self.home,
            env=self.env,
        )
        self.versions = self._read()["versions"]

    def _read(self) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdout is not None
        while True:
            line = self.proc.stdout.readline()
            if not line:
                log = (self.home / "worker.log").read_text(errors="replace")[-3000:]
                sys.exit(f"bench_postgres: the {self.target.label} worker exited:\n{log}")
            if line.startswith("{"):
                reply: dict[str, Any] = json.loads(line)
                return reply

    def ask(self, request: dict[str, Any]) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return self._read()

    def stop(self) -> None:
        if self.proc is not None and self.proc.stdin is not None:
            self.proc.stdin.close()
            self.proc.wait(timeout=60)


def worker_env(target: Target, home: Path, server: PgServer) -> dict[str, str]:
    """This process's environment without our or libpq's variables, plus the target's."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.upper().startswith(("GOVERNED_MEMORY_", "OTEL_", "PG"))
        and k not in ("WORKSPACE_DIR", "PYTHONPATH")
    }
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    if target.ours:
        env["WORKSPACE_DIR"] = str(home / "ws")
    if target.kind == "regulated":
        env["GOVERNED_MEMORY_POLICY"] = "regulated"
        env["GOVERNED_MEMORY_MASTER_KEY"] = MASTER_KEY
        env["GOVERNED_MEMORY_AUDIT_KEY"] = AUDIT_KEY
    if target.database and target.ours:
        env["GOVERNED_MEMORY_DATABASE_URL"] = server.url(target.database)
    elif target.database:
        env["LANGGRAPH_DATABASE_URL"] = server.url(target.database)
    return env


def prepare_ours(worker: Worker) -> str | None:
    """``governed-memory db upgrade``, a warm-up, the probe: None when the target works, else why."""
    done = subprocess.run(
        [*governed_memory_cli(), "db", "upgrade"],
        capture_output=True,
        text=True,
        cwd=worker.home,
        env=worker.env,
        check=False,
    )
    if done.returncode != 0:
        lines = [ln.strip() for ln in (done.stderr + done.stdout).splitlines() if ln.strip()]
        return f"`governed-memory db upgrade` failed: {lines[-1] if lines else done.returncode}"
    worker.ask({"warm": {"tag": "warm"}})
    reply = worker.ask({"probe": {"tag": "probe", "writers": 1, "messages": 0}})
    if "error" in reply:
        return f"the probe failed: {reply['error']}"
    return reply.get("unavailable")


# -- output -----------------------------------------------------------------------------------


@dataclass
class Results:
    rates: dict[tuple[str, bool, str, int], list[float]] = field(default_factory=dict)
    latencies: dict[tuple[str, bool, str, int], list[int]] = field(default_factory=dict)
    written: dict[str, int] = field(default_factory=dict)
    growth: dict[str, int] = field(default_factory=dict)  # database bytes, by target
    failed: dict[tuple[str, bool, str, int], list[str]] = field(default_factory=dict)

    def add(self, key: tuple[str, bool, str, int], reply: dict[str, Any]) -> None:
        self.rates.setdefault(key, []).append(reply["ops"] / reply["seconds"])
        self.latencies.setdefault(key, []).extend(reply["latencies"])

    def median(self, key: tuple[str, bool, str, int]) -> float | None:
        rates = self.rates.get(key)
        return statistics.median(rates) if rates else None

    def cells(self, key: tuple[str, bool, str, int]) -> list[str]:
        rates, lat = self.rates.get(key), self.latencies.get(key)
        failed = len(self.failed.get(key, []))
        if not rates or not lat:
            return [f"failed {failed}/{failed}" if failed else "", "", ""]
        spread = f"{statistics.median(rates):,.0f} ({min(rates):,.0f}-{max(rates):,.0f})"
        if failed:
            spread += f" failed {failed}/{failed + len(rates)}"
        ms = [x / 1000 for x in lat]
        return [spread, f"{percentile(ms, 50):.2f}", f"{percentile(ms, 99):.2f}"]


def throughput_table(
    results: Results,
    targets: list[Target],
    counts: list[int],
    modes: list[str],
    one_agent: bool,
    unavailable: dict[str, str],
) -> str:
    headers = ["target", "writers"]
    for mode in modes:
        headers += [f"{mode} msg/s", "p50 ms", "p99 ms"]
    rows, missing = [], []
    for target in targets:
        if target.key in unavailable:
            missing.append(target)
            continue
        for writers in counts:
            if one_agent and writers == 1:
                continue
            row = [target.label, str(writers)]
            for mode in modes:
                row += results.cells((target.key, one_agent, mode, writers))
            rows.append(row)
    text = table(headers, rows) if rows else ""
    width = max([len(headers[0])] + [len(r[0]) for r in rows])
    for target in missing:
        text += f"\n{target.label.ljust(width)}  not available: {unavailable[target.key]}"
    for (key, alone, mode, writers), errors in results.failed.items():
        if alone == one_agent and BY_KEY[key] in targets:
            text += (
                f"\n{BY_KEY[key].label}, {writers} {mode}: failed {len(errors)} time(s): "
                f"{errors[0]}"
            )
    return text


def ratio(a: float | None, b: float | None) -> str:
    return "n/a" if a is None or b is None or b == 0 else f"{a / b:.2f}x"


@dataclass
class Run:
    """One run's workers, what is not available and why, and the databases' sizes."""

    targets: list[Target]
    server: PgServer
    scratch: Path
    began: float = field(default_factory=time.monotonic)
    workers: dict[str, Worker] = field(default_factory=dict)
    unavailable: dict[str, str] = field(default_factory=dict)
    baseline: dict[str, int] = field(default_factory=dict)

    def note(self, what: str) -> None:
        print(f"  {what} ({time.monotonic() - self.began:.0f} s)", file=sys.stderr, flush=True)

    def prepare(self, lg_python: Path | None) -> None:
        """Start every target's worker, warm it, and set aside those that do not work."""
        for target in self.targets:
            home = self.scratch / target.key
            home.mkdir()
            if target.database:
                self.server.sql(f'CREATE DATABASE "{target.database}" TEMPLATE template0')
            python = Path(sys.executable) if target.ours else lg_python
            assert python is not None
            worker = Worker(target, python, home, worker_env(target, home, self.server))
            worker.start()
            self.workers[target.key] = worker
            why = None
            if target.backend == "postgres":
                why = prepare_ours(worker)
            elif target.backend == "langgraph":
                why = worker.ask({"setup": {}}).get("error")
                worker.ask({"warm": {"tag": "warm"}})
            else:
                worker.ask({"warm": {"tag": "warm"}})
            if why:
                self.unavailable[target.key] = why
                worker.stop()
                del self.workers[target.key]
            elif target.database:
                self.baseline[target.key] = database_bytes(self.server, target.database)
            self.note(f"{target.label}: {'not available: ' + why if why else 'ready'}")

    def measure(self, rounds: int, modes: list[str], counts: list[int], messages: int) -> Results:
        """Every cell, ``rounds`` times, targets alternating in an order rotated each round."""
        results = Results()
        live = [t for t in self.targets if t.key in self.workers]
        cell_no = 0
        for round_no in range(rounds):
            shift = round_no % max(1, len(live))
            order = live[shift:] + live[:shift]
            for one_agent, mode, writers, target in (
                (one_agent, mode, writers, target)
                for one_agent in (False, True)
                for mode in modes
                for writers in counts
                for target in order
                if not one_agent or (writers > 1 and target.ours)
            ):
                cell_no += 1
                spec = {
                    "tag": f"c{cell_no}",
                    "mode": mode,
                    "writers": writers,
                    "messages": messages,
                    "one_agent": one_agent,
                }
                reply = self.workers[target.key].ask({"cell": spec})
                key = (target.key, one_agent, mode, writers)
                if "error" in reply:
                    # A failed cell is a result: it is printed, and the run goes on.
                    results.failed.setdefault(key, []).append(reply["error"])
                    with FAILURES.open("a", encoding="utf-8") as log:
                        log.write(f"{target.label} {spec}:\n{reply.get('trace', reply['error'])}\n")
                    continue
                results.add(key, reply)
                warm = writers * target.per_call
                results.written[target.key] = (
                    results.written.get(target.key, 0) + reply["ops"] + warm
                )
            self.note(f"round {round_no + 1}/{rounds} done")
        results.growth = {
            t.key: database_bytes(self.server, t.database) - self.baseline[t.key]
            for t in live
            if t.database
        }
        return results

    def close(self) -> None:
        for worker in self.workers.values():
            worker.stop()


def header(
    run: Run,
    messages: int,
    rounds: int,
    disk: tuple[float, float],
    files: tuple[float, float] | None,
) -> str:
    versions: dict[str, str] = {}
    for worker in run.workers.values():
        versions.update(worker.versions)
    lg = ", ".join(f"{n} {v}" for n, v in versions.items() if n.startswith("lang"))
    return (
        f"Appends of ~400-byte messages, {messages} per writer, writers as threads and "
        "processes\n"
        f"{platform.python_implementation()} {platform.python_version()} on "
        f"{platform.system()} {platform.release()}, {os.cpu_count()} CPUs; "
        f"{server_facts(run.server)}\n"
        f"append+fdatasync of 400 bytes where the server's WAL is: {disk[0]:.2f} ms median, "
        f"{disk[1]:.2f} ms p99"
        + (f"; in --dir (the files rows): {files[0]:.2f} / {files[1]:.2f} ms\n" if files else "\n")
        + f"governed_memory {versions.get('governed-memory', '?')}, psycopg "
        f"{versions.get('psycopg', '?')}; {lg or 'LangGraph not run'}\n"
        f"{rounds} rounds, targets alternating (order rotated each round); msg/s median "
        "(min-max); latency per call over all rounds (LangGraph invoke: per turn of 2 "
        "messages)\n"
    )


def ratios(results: Results, counts: list[int], modes: list[str]) -> str:
    pairs = [
        ("pg plain/LG invoke", "pg-plain", "langgraph-invoke", None),
        ("pg enc/LG invoke", "pg-regulated", "langgraph-invoke", None),
        ("pg plain/LG put", "pg-plain", "langgraph-put", None),
        ("pg enc/LG put", "pg-regulated", "langgraph-put", None),
        (f"pg plain/{counts[0]} writer", "pg-plain", "pg-plain", counts[0]),
        (f"pg enc/{counts[0]} writer", "pg-regulated", "pg-regulated", counts[0]),
        ("files enc/plain", "files-regulated", "files-plain", None),
        ("pg enc/plain", "pg-regulated", "pg-plain", None),
    ]
    rows = [
        [mode, str(writers)]
        + [
            ratio(
                results.median((a, False, mode, writers)),
                results.median((b, False, mode, over or writers)),
            )
            for _, a, b, over in pairs
        ]
        for mode in modes
        for writers in counts
    ]
    return table(["mode", "writers", *(p[0] for p in pairs)], rows)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--messages", type=int, default=30, help="messages per writer (even)")
    parser.add_argument("--writers", default="1,4,16", help="writer counts, comma-separated")
    parser.add_argument("--modes", default="threads,processes")
    parser.add_argument(
        "--targets", default=",".join(t.key for t in TARGETS), help="a subset, comma-separated"
    )
    parser.add_argument(
        "--langgraph-venv", type=Path, default=ROOT / ".cache" / "bench-envs" / "langgraph"
    )
    parser.add_argument("--dir", type=Path, default=None, help="scratch folder (default: temp)")
    args = parser.parse_args(argv)
    unknown = [k for k in args.targets.split(",") if k and k not in BY_KEY]
    if unknown:
        parser.error(
            f"--targets: {', '.join(map(repr, unknown))} is not a target; use a "
            f"comma-separated subset of {','.join(BY_KEY)}"
        )
    bad_modes = [m for m in args.modes.split(",") if m and m not in MODES]
    if bad_modes:
        parser.error(f"--modes: {', '.join(map(repr, bad_modes))}; use {','.join(MODES)}")
    try:
        counts = [int(c) for c in args.writers.split(",") if c.strip()]
    except ValueError:
        parser.error(f"--writers {args.writers!r}: use positive integers, e.g. 1,4,16")
    if not counts or min(counts) < 1:
        parser.error(f"--writers {args.writers!r}: use positive integers, e.g. 1,4,16")
    modes = [m for m in args.modes.split(",") if m in MODES]
    messages = args.messages + args.messages % 2  # a LangGraph turn is two messages
    targets = [BY_KEY[k] for k in args.targets.split(",") if k]
    lg_python = install_langgraph(args.langgraph_venv) if any(not t.ours for t in targets) else None

    scratch = Path(tempfile.mkdtemp(prefix="bench-postgres-", dir=args.dir))
    server = start_server()
    run = Run(targets, server, scratch)
    try:
        run.note("server started")
        disk = fdatasync_ms(server.root)
        files = fdatasync_ms(scratch) if args.dir else None
        run.prepare(lg_python)
        print(header(run, messages, args.rounds, disk, files), flush=True)
        results = run.measure(args.rounds, modes, counts, messages)
    finally:
        run.close()
        server.cleanup()
        shutil.rmtree(scratch, ignore_errors=True)

    print("Each writer its own agent (LangGraph: its own thread)")
    print(throughput_table(results, targets, counts, modes, False, run.unavailable))
    print()
    ours = [t for t in targets if t.ours]
    if ours and any(w > 1 for w in counts):
        print("Several writers on ONE agent (and customer)")
        print(throughput_table(results, ours, counts, modes, True, run.unavailable))
        print()
    print("Ratios of median msg/s (own agents)")
    print(ratios(results, counts, modes))
    print()
    if results.growth:
        print(
            "Database growth per message written: "
            + ", ".join(
                f"{BY_KEY[k].label} {size / max(1, results.written.get(k, 1)):,.0f} bytes"
                for k, size in results.growth.items()
            )
        )
        print()
    for line in summary(results, counts, modes, run.unavailable):
        print(line)
    if results.failed:
        print(f"\nTracebacks of the failed cells: {FAILURES}")
    return 0


def summary(
    results: Results, counts: list[int], modes: list[str], unavailable: dict[str, str]
) -> list[str]:
    """One line per target of issue 14 point 7 (and per yardstick or backend).

    A cell of ours that failed in every round counts as 0 msg/s.
    """

    def med(key: str, mode: str, writers: int) -> float | None:
        return results.median((key, False, mode, writers))

    def compare(ours: str, other: str) -> list[tuple[float, str, int]]:
        """(ours / other, mode, writers) wherever ``other`` was measured."""
        found = []
        for mode in modes:
            for writers in counts:
                theirs = med(other, mode, writers)
                if theirs:
                    found.append(((med(ours, mode, writers) or 0.0) / theirs, mode, writers))
        return found

    def not_run(key: str) -> str | None:
        if key in unavailable:
            return f"not available: {unavailable[key]}"
        if not any(k[0] == key for k in results.rates):
            return "not run"
        return None

    lines = []
    for ours in ("pg-plain", "pg-regulated"):
        for yardstick in ("langgraph-invoke", "langgraph-put"):
            head = f"At least {BY_KEY[yardstick].label}'s throughput, {BY_KEY[ours].label}:"
            why = not_run(ours) or not_run(yardstick)
            if why:
                lines.append(f"{head} {why}")
                continue
            found = compare(ours, yardstick)
            worst = min(found)
            verdict = "meets" if worst[0] >= 1.0 else "MISSES"
            lines.append(
                f"{head} {verdict} (lowest {worst[0]:.2f}x, {worst[2]} {worst[1]}; highest "
                f"{max(found)[0]:.2f}x)"
            )
    for key in ("pg-plain", "pg-regulated"):
        head = f"Aggregate growing with writers, {BY_KEY[key].label}:"
        why = not_run(key)
        if why or len(counts) < 2:
            lines.append(f"{head} {why or 'needs two writer counts'}")
            continue
        parts, grows = [], True
        for mode in modes:
            rates = [med(key, mode, w) or 0.0 for w in counts]
            grows = grows and all(b > a for a, b in itertools.pairwise(rates))
            parts.append(f"{mode} " + " -> ".join(f"{r:,.0f}" for r in rates))
        verdict = "meets" if grows else "MISSES"
        lines.append(f"{head} {verdict} ({'; '.join(parts)} msg/s at {counts} writers)")
    for backend, plain, regulated in (
        ("postgres", "pg-plain", "pg-regulated"),
        ("files", "files-plain", "files-regulated"),
    ):
        head = f"Encrypted+audited at least half as fast as plaintext, {backend}:"
        why = not_run(plain) or not_run(regulated)
        if why:
            lines.append(f"{head} {why}")
            continue
        found = compare(regulated, plain)
        worst = min(found)
        verdict = "meets" if worst[0] >= 0.5 else "MISSES"
        note = (
            " (default mode has no fsync per add; encrypted+audited is durable per add)"
            if backend == "files"
            else ""
        )
        lines.append(
            f"{head} {verdict} (lowest {worst[0]:.2f}x, {worst[2]} {worst[1]}; highest "
            f"{max(found)[0]:.2f}x){note}"
        )
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
