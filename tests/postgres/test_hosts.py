"""Two hosts, one database: the guarantees of one host hold across hosts.

Each :class:`~hosts.Host` has a folder of its own (working folder,
``WORKSPACE_DIR``, ``TMPDIR``, ``HOME``) and the deployment's settings: the
database URL, the ``regulated`` policy (consent, subject isolation, encryption,
audit, signed receipts) and the keys. The hosts share nothing but the PostgreSQL
server the test run started, so whatever one host sees of another's work came
through the database, and every test ends by checking that neither host's
workspace folder holds a file.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hosts import Host, Live, RemoteError
from pg_server import PgServer

from governed_memory import LocalSigningKey, generate_audit_key

MASTER_KEY = base64.b64encode(bytes(range(32))).decode("ascii")
CANARY = "account 4411-2291-7730"


@pytest.fixture
def deployment(pg_schema_url: str) -> dict[str, str]:
    """What every host of the deployment is given: database (schema applied), policy, keys."""
    return {
        "GOVERNED_MEMORY_DATABASE_URL": pg_schema_url,
        "GOVERNED_MEMORY_POLICY": "regulated",
        "GOVERNED_MEMORY_MASTER_KEY": MASTER_KEY,
        "GOVERNED_MEMORY_AUDIT_KEY": generate_audit_key(),
        "GOVERNED_MEMORY_SIGNING_KEY": LocalSigningKey.generate().to_base64(),
    }


@pytest.fixture
def hosts(tmp_path: Path, deployment: dict[str, str]) -> Iterator[tuple[Host, Host]]:
    a, b = Host(tmp_path, "host-a", deployment), Host(tmp_path, "host-b", deployment)
    try:
        yield a, b
        assert a.local_files() == [] and b.local_files() == []  # nothing on either disk
    finally:
        a.close()
        b.close()


def _grant(host: Host, subject: str) -> None:
    host.cli("consent", "grant", "--subject", subject, "--purpose", "persist", "--actor", "crm")


def _teller(host: Host, subject: str) -> Live:
    """A live process on ``host`` with a Conversation of agent Teller for ``subject``."""
    live = host.start()
    live.run(
        f"conv = Conversation(memory_md_path=memory_md_path('Teller'), subject_id={subject!r})"
    )
    return live


def _stored(host: Host, subject: str) -> list[str]:
    """What a new Conversation on ``host`` loads for ``subject`` (its preload, as texts)."""
    live = _teller(host, subject)
    try:
        return list(live.eval("[m['content'] for m in conv.conversation_history]"))
    finally:
        live.close()


def test_a_message_added_on_one_host_is_loaded_on_the_other(hosts: tuple[Host, Host]) -> None:
    a, b = hosts
    _grant(a, "C-1")
    writer = _teller(a, "C-1")
    writer.run(f"conv.add('Human', 'my {CANARY}')")
    assert any(CANARY in text for text in _stored(b, "C-1"))


def test_a_withdrawal_on_one_host_stops_the_next_write_on_the_other(
    hosts: tuple[Host, Host],
) -> None:
    a, b = hosts
    _grant(a, "C-2")
    live = _teller(b, "C-2")
    live.run("conv.add('Human', 'kept while consent stands')")
    a.cli("consent", "withdraw", "--subject", "C-2", "--purpose", "persist", "--actor", "C-2")
    live.run("conv.add('Human', 'said after the withdrawal')")  # the next write: not stored
    assert live.eval("conv.conversation_history[-1]['content']") == "said after the withdrawal"
    _grant(a, "C-2")  # to read back what is stored, consent is needed again
    stored = " ".join(_stored(a, "C-2"))
    assert "kept while consent stands" in stored
    assert "said after the withdrawal" not in stored


def test_an_erasure_on_one_host_reaches_a_live_conversation_on_the_other(
    hosts: tuple[Host, Host],
) -> None:
    a, b = hosts
    _grant(a, "C-3")
    live = _teller(b, "C-3")
    live.run("conv.add('Human', 'erase this later')")
    a.cli("erase", "--subject", "C-3", "--reason", "request R-1", "--actor", "dpo", "--yes")
    live.run("conv.add('Human', 'the next turn')")
    with pytest.raises(RemoteError) as caught:  # a summary built from the erased words
        live.run("conv.compact('[Compressed Memory Summary] erase this later')")
    assert "ErasedDuringCompactionError" in caught.value.mro
    assert "erase this later" not in live.eval("conv.return_history_as_string()")
    _grant(a, "C-3")
    assert "erase this later" not in " ".join(_stored(a, "C-3"))


def test_a_hold_placed_on_one_host_blocks_an_erasure_run_from_the_other(
    hosts: tuple[Host, Host],
) -> None:
    a, b = hosts
    _grant(a, "C-4")
    writer = _teller(a, "C-4")
    writer.run("conv.add('Human', 'kept for the litigation')")
    a.cli("hold", "place", "--subject", "C-4", "--reason", "litigation L-9", "--actor", "legal")
    done = b.cli(
        "erase", "--subject", "C-4", "--reason", "r", "--actor", "dpo", "--yes", check=False
    )
    assert done.returncode != 0
    assert "hold" in done.stderr.lower()
    assert "kept for the litigation" in " ".join(_stored(b, "C-4"))


_APPENDER = r"""
import sys
from governed_memory import *
gov = Governance()
for i in range(int(sys.argv[1])):
    gov.grant(f"{sys.argv[2]}-{i}", "persist", actor="load")
"""


def test_hosts_appending_at_once_keep_one_verifiable_audit_chain(
    hosts: tuple[Host, Host],
) -> None:
    a, b = hosts
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _APPENDER, "15", f"{host.name}-{n}"],
            cwd=host.folder,
            env=host.env,
        )
        for host in (a, b)
        for n in range(2)
    ]
    for proc in procs:
        assert proc.wait(timeout=120) == 0
    report = json.loads(a.cli("audit", "verify", "--json").stdout)
    assert report["ok"] is True
    events = [e["event"] for e in json.loads(b.cli("audit", "tail", "-n", "200", "--json").stdout)]
    assert events.count("consent.grant") == 60


_WRITER = r"""
import sys
from governed_memory import *
conv = Conversation(memory_md_path=memory_md_path("Teller"), subject_id="C-5")
i = 0
while True:
    conv.add("Human", f"message {i:05d}")
    print(i, flush=True)  # acknowledged: add() returned
    i += 1
"""


def _killed_after(host: Host, script: str, lines: int) -> list[str]:
    """Run ``script`` on ``host`` until it has printed ``lines`` acknowledgements, then
    kill -9 it, wherever it is (inside a transaction, most likely); those lines."""
    writer = subprocess.Popen(
        [sys.executable, "-c", script],
        cwd=host.folder,
        env=host.env,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert writer.stdout is not None
    acknowledged = [writer.stdout.readline() for _ in range(lines)]
    writer.kill()
    writer.wait()
    writer.stdout.close()
    return acknowledged


def test_a_writer_killed_mid_run_loses_no_acknowledged_message(hosts: tuple[Host, Host]) -> None:
    a, b = hosts
    _grant(a, "C-5")
    acknowledged = _killed_after(a, _WRITER, 25)
    stored = " ".join(_stored(b, "C-5"))
    for line in acknowledged:
        assert f"message {int(line):05d}" in stored


_THREADED_WRITER = r"""
import sys, threading
from governed_memory import *
printing = threading.Lock()

def write(t):
    conv = Conversation(memory_md_path=memory_md_path(f"Teller{t}"), subject_id=f"C-{t}")
    i = 0
    while True:
        conv.add("Human", f"message {t} {i:05d}")
        with printing:
            print(t, i, flush=True)  # acknowledged: add() returned
        i += 1

for t in range(4):
    threading.Thread(target=write, args=(t,)).start()
"""


def test_threads_killed_mid_batch_lose_no_acknowledged_message_and_keep_the_chain(
    hosts: tuple[Host, Host],
) -> None:
    """Four threads of one process: their adds share transactions (batched joins), so
    the kill -9 most likely lands while one is in flight. What was acknowledged stays."""
    a, b = hosts
    for t in range(4):
        _grant(a, f"C-{t}")
    acknowledged = [line.split() for line in _killed_after(a, _THREADED_WRITER, 80)]
    live = b.start()
    try:
        for t in range(4):
            live.run(
                f"conv = Conversation(memory_md_path=memory_md_path('Teller{t}'), "
                f"subject_id='C-{t}')"
            )
            stored = " ".join(live.eval("[m['content'] for m in conv.conversation_history]"))
            for thread, i in acknowledged:
                if int(thread) == t:
                    assert f"message {t} {int(i):05d}" in stored
    finally:
        live.close()
    report = json.loads(b.cli("audit", "verify", "--json").stdout)
    assert report["ok"] is True


def test_the_database_holds_no_plaintext_of_a_governed_run(
    hosts: tuple[Host, Host], pg_server: PgServer, deployment: dict[str, str]
) -> None:
    """A pg_dump after consent, messages, a hold: ciphertext, wrapped keys and keyed hashes only."""
    a, b = hosts
    _grant(a, "C-6")
    live = _teller(a, "C-6")
    live.run(f"conv.add('Human', 'my {CANARY}')")
    live.run("conv.add('AI', 'noted')")
    b.cli("hold", "place", "--subject", "C-6", "--reason", "audit sample", "--actor", "legal")
    dump = pg_server.dump(deployment["GOVERNED_MEMORY_DATABASE_URL"])
    for secret in (CANARY, "C-6", "audit sample"):
        assert secret.encode() not in dump
        assert secret.encode().hex().encode() not in dump


def test_a_wrong_password_is_one_line_naming_the_server(
    tmp_path: Path, pg_server: PgServer
) -> None:
    pg_server.sql("CREATE ROLE gm_app LOGIN PASSWORD 'right'")
    try:
        url = pg_server.tcp_url("postgres", "gm_app", "wrong-password")
        host = Host(tmp_path, "host-c", {"GOVERNED_MEMORY_DATABASE_URL": url})
        done = host.cli("db", "status", check=False)
        assert done.returncode != 0
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1
        assert f"127.0.0.1:{pg_server.port}" in lines[0] and "password" in lines[0]
        assert "wrong-password" not in done.stderr + done.stdout
    finally:
        pg_server.sql("DROP ROLE gm_app")


def test_remote_errors_name_the_exception_of_the_host(hosts: tuple[Host, Host]) -> None:
    a, _ = hosts
    live = a.start()
    with pytest.raises(RemoteError) as caught:
        live.run("Conversation(memory_md_path=memory_md_path('Teller'), governance=None)")
    assert "ConfigurationError" in caught.value.mro
