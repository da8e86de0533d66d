"""The command line and the scheduler daemon ship their spans to the configured OTLP collector.

A real OTLP/HTTP receiver on 127.0.0.1 (a small ``http.server`` recording the
POSTs to ``/v1/traces``) stands in for the collector; the CLI runs as its own
process, so the test also shows the spans are flushed before it exits.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

AUDIT_KEY = "ef" * 32


class Collector:
    """Records the OTLP/HTTP trace exports it receives."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, dict[str, str], bytes]] = []
        collector = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                collector.requests.append(
                    (self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                )
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def spans(self) -> list[tuple[str, str]]:
        """(service.name, span name) of every span received at /v1/traces."""
        found = []
        for path, _headers, body in self.requests:
            assert path == "/v1/traces"
            request = ExportTraceServiceRequest.FromString(body)
            for resource_spans in request.resource_spans:
                service = next(
                    a.value.string_value
                    for a in resource_spans.resource.attributes
                    if a.key == "service.name"
                )
                for scope in resource_spans.scope_spans:
                    found.extend((service, span.name) for span in scope.spans)
        return found

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def collector() -> Iterator[Collector]:
    receiver = Collector()
    try:
        yield receiver
    finally:
        receiver.close()


@pytest.fixture
def policy(tmp_path: Path) -> Path:
    path = tmp_path / "policy.toml"
    path.write_text(
        '[policy]\nid = "bank"\nversion = "1"\n\n[audit]\nenabled = true\n\n'
        '[retention]\narchives_max_age = "30d"\n\n[schedule]\npurge_interval = "1d"\n'
    )
    return path


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.upper().startswith(("OTEL_", "GOVERNED_"))}
    env.update(
        GOVERNED_MEMORY_AUDIT_KEY=AUDIT_KEY,
        NO_PROXY="127.0.0.1,localhost",
        no_proxy="127.0.0.1,localhost",
        **extra,
    )
    return env


def _cli(workspace: Path, policy: Path | None, *args: str) -> list[str]:
    """The CLI as its own process (``policy`` None: the default policy)."""
    chosen = [] if policy is None else ["--policy", str(policy)]
    return [
        sys.executable,
        "-c",
        "from governed_memory._cli import main; main()",
        "--workspace",
        str(workspace),
        *chosen,
        *args,
    ]


def run_scheduler_until_it_purges(command: list[str], env: dict[str, str]) -> None:
    """Run ``scheduler run`` until it reports a purge, then stop it with SIGTERM (exit 0)."""
    proc = subprocess.Popen(
        command, env=env, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True
    )
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 60
        seen = ""
        while "deleted " not in seen and time.monotonic() < deadline:
            seen += proc.stderr.readline()  # never purged: it catches up at once
        assert "deleted " in seen, seen
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(60) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        if proc.stderr is not None:
            proc.stderr.close()


def _grant(workspace: Path, policy: Path, env: dict[str, str]) -> None:
    done = subprocess.run(
        _cli(workspace, policy, "consent", "grant", "--subject", "s-1", "--purpose", "persist"),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr


def test_a_cli_command_exports_its_spans_before_it_exits(
    workspace: Path, policy: Path, collector: Collector
) -> None:
    env = _env(
        GOVERNED_MEMORY_OTLP_ENDPOINT=collector.url,
        GOVERNED_MEMORY_OTLP_HEADERS="authorization=Bearer t0ken",
        GOVERNED_MEMORY_SERVICE_NAME="bank-agents",
    )
    _grant(workspace, policy, env)
    assert ("bank-agents", "governed_memory consent.grant") in collector.spans()
    assert ("bank-agents", "governed_memory policy.load") in collector.spans()
    assert all(h.get("authorization") == "Bearer t0ken" for _, h, _ in collector.requests)


def test_the_standard_otel_variables_configure_the_export(
    workspace: Path, policy: Path, collector: Collector
) -> None:
    env = _env(
        OTEL_EXPORTER_OTLP_ENDPOINT=collector.url,
        OTEL_EXPORTER_OTLP_HEADERS="x-team=payments",
        OTEL_SERVICE_NAME="from-otel",
    )
    _grant(workspace, policy, env)
    assert ("from-otel", "governed_memory consent.grant") in collector.spans()
    assert all(h.get("x-team") == "payments" for _, h, _ in collector.requests)


def test_our_variables_win_over_the_standard_ones(
    workspace: Path, policy: Path, collector: Collector
) -> None:
    other = Collector()
    try:
        env = _env(
            GOVERNED_MEMORY_OTLP_ENDPOINT=collector.url,
            OTEL_EXPORTER_OTLP_ENDPOINT=other.url,
            GOVERNED_MEMORY_SERVICE_NAME="ours",
            OTEL_SERVICE_NAME="theirs",
        )
        _grant(workspace, policy, env)
        assert ("ours", "governed_memory consent.grant") in collector.spans()
        assert other.requests == []
    finally:
        other.close()


def test_no_endpoint_sends_nothing(workspace: Path, policy: Path, collector: Collector) -> None:
    _grant(workspace, policy, _env())
    assert collector.requests == []


def test_the_scheduler_daemon_exports_its_purge_spans_by_the_time_it_stops(
    workspace: Path, policy: Path, collector: Collector
) -> None:
    env = _env(GOVERNED_MEMORY_OTLP_ENDPOINT=collector.url, GOVERNED_MEMORY_SERVICE_NAME="sched")
    run_scheduler_until_it_purges(
        _cli(workspace, policy, "scheduler", "run", "--leader-retry", "0.2"), env
    )
    assert ("sched", "delete_memory") in collector.spans()
