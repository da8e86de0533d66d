"""Shared fixtures. No test touches the network or the real workspace."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from governed_memory import AgentStore, Clock, FixedClock, PlaintextAgentStore

if TYPE_CHECKING:
    from llm_stub import StubLLM
    from pg_server import PgServer

FIXTURES = Path(__file__).parent / "fixtures" / "swarms-16.0.3"
MEMORY_BACKED_TMP = Path("/dev/shm")
MEMORY_BACKED_TMP_MIN_FREE = 2 * 1024**3  # the suite writes a few hundred MB at most


def pytest_configure(config: pytest.Config) -> None:
    """Put the tests' temporary files in memory (``/dev/shm``) unless ``TMPDIR`` is set.

    The code under test fsyncs every append, compaction and rename, and on this
    project's disks an fsync costs about a millisecond: a third to a half of the
    suite's time went there. No test can observe what an fsync adds (surviving a
    power cut; a killed process loses nothing the kernel holds either way), the same
    reasoning as ``fsync = off`` in tests/pg_server.py. The calls still run, on
    tmpfs, where they return at once. Set ``TMPDIR`` to choose another folder; the
    subprocesses the tests start inherit it, and pytest's ``tmp_path`` and
    ``tempfile`` follow it. A ``/dev/shm`` with under 2 GiB free (a container's
    default is 64 MiB) is left alone: the disk it is.
    """
    if "TMPDIR" in os.environ or not os.access(MEMORY_BACKED_TMP, os.W_OK | os.X_OK):
        return
    if shutil.disk_usage(MEMORY_BACKED_TMP).free < MEMORY_BACKED_TMP_MIN_FREE:
        return  # a container's default 64 MB /dev/shm: the disk it is
    os.environ["TMPDIR"] = str(MEMORY_BACKED_TMP)
    tempfile.tempdir = None  # gettempdir() computes it again, from TMPDIR


@pytest.fixture(autouse=True)
def _isolated_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Keep tests off the developer's workspace, settings and network."""
    for name in (
        "WORKSPACE_DIR",
        "GOVERNED_MEMORY_POLICY",
        "GOVERNED_MEMORY_MASTER_KEY",
        "GOVERNED_MEMORY_MASTER_KEY_FILE",
        "OPENAI_API_KEY",
        "OPENAI_API_BASE",
    ):
        monkeypatch.delenv(name, raising=False)
    # Every setting and policy override (GOVERNED_MEMORY_AUDIT__...), and the
    # standard OpenTelemetry variables: a developer's OTEL_EXPORTER_OTLP_ENDPOINT
    # would make in-process CLI commands export spans.
    for name in list(os.environ):
        if name.upper().startswith(("GOVERNED_MEMORY_", "OTEL_")) or name.startswith("PG"):
            monkeypatch.delenv(name)
    monkeypatch.chdir(tmp_path)


@pytest.fixture(autouse=True)
def _shared_governance_closed() -> Iterator[None]:
    """Each test leaves no shared Governance behind, its database pool and audit segment closed.

    The process's Governance per settings (``shared_governance``: the in-process CLI,
    code without ``governance=``) lives as long as the process, by design; a test
    process runs many such "processes", and a Governance on a test's database kept
    two pooled connections open on the server until the worker exited.
    """
    yield
    wiring = sys.modules.get("governed_memory._wiring")
    if wiring is None:  # default mode only: nothing was shared
        return
    with wiring._SHARED_LOCK:
        governances = list(wiring._SHARED.values())
        wiring._SHARED.clear()
    for gov in governances:
        gov.close()


@pytest.fixture(scope="session")
def pg_server() -> PgServer:
    """This test process's throw-away PostgreSQL server (tests/pg_server.py)."""
    from pg_server import server

    return server()


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """The URL of a fresh, empty database on the test server, as its superuser."""
    return pg_server.url(pg_server.create_database())


@pytest.fixture
def pg_schema_url(pg_server: PgServer) -> str:
    """The URL of a fresh database on the test server with the schema applied, as its superuser."""
    return pg_server.url(pg_server.schema_database())


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    """An empty workspace folder."""
    path = tmp_path / "ws"
    path.mkdir()
    return path


@pytest.fixture
def open_umask() -> Iterator[None]:
    """A umask of 0, which would leave new files world-readable (tests of 0600/0700 modes)."""
    old = os.umask(0)
    try:
        yield
    finally:
        os.umask(old)


@pytest.fixture
def clock() -> FixedClock:
    """A clock at 2026-11-30 10:00 that ticks 1 ms per reading."""
    return FixedClock(dt.datetime(2026, 11, 30, 10, 0, 0), tick=dt.timedelta(milliseconds=1))


@pytest.fixture
def fixtures_dir() -> Path:
    """Files the reference implementation (swarms 16.0.3) wrote."""
    return FIXTURES


def _plaintext_store(path: Path, header: Callable[[], str], clock: Clock) -> AgentStore:
    return PlaintextAgentStore(path, header, clock=clock)


def _encrypted_store(path: Path, header: Callable[[], str], clock: Clock) -> AgentStore:
    from governed_memory._crypto import Keyring, LocalKeyProvider
    from governed_memory._stores._encrypted import EncryptedAgentStore

    # The keyring beside the workspace (<tmp>/keyring), so a workspace holds agents only.
    keyring = Keyring(path.parents[2].parent / "keyring", LocalKeyProvider(bytes(range(32))))
    return EncryptedAgentStore(path, header, keyring=keyring, clock=clock)


StoreMaker = Callable[[Path, Callable[[], str], Clock], AgentStore]
"""Builds a store from (MEMORY.md path, header factory, clock)."""

# Every AgentStore implementation, by readable id; tests/test_stores_plaintext.py's
# contract tests run over each. Append a pytest.param for a new store.
STORE_FACTORIES: list[Any] = [
    pytest.param(_plaintext_store, id="plaintext"),
    pytest.param(_encrypted_store, id="encrypted"),
]


@pytest.fixture(params=STORE_FACTORIES)
def store_factory(request: pytest.FixtureRequest) -> StoreMaker:
    """One AgentStore implementation per parameter (contract tests)."""
    maker: StoreMaker = request.param
    return maker


@pytest.fixture(params=["plaintext", "sealed"])
def record_mode(request: pytest.FixtureRequest, tmp_path: Path) -> Any:
    """A governance registry form: plaintext, or sealed (a RecordMode, see sealing_helpers)."""
    from sealing_helpers import RecordMode

    return RecordMode(str(request.param), tmp_path / "keyring")


@pytest.fixture(scope="session", autouse=True)
def _no_network() -> Iterator[None]:
    """Connections and name lookups for non-loopback addresses fail in every test."""
    from llm_stub import block_network

    with block_network():
        yield


@pytest.fixture
def stub_llm() -> Iterator[StubLLM]:
    """An OpenAI-compatible chat-completions server on 127.0.0.1 (tests/llm_stub.py)."""
    from llm_stub import StubLLM

    server = StubLLM().start()
    yield server
    server.stop()
