"""With audit off (the default policy), the CLI and the scheduler still export spans to a configured collector.

An endpoint is a deployment's request for spans: the policy's ``audit.enabled``
decides only whether the hash-chained log is written. With audit off the
sink is a spans-only trail, so nothing lands in the workspace. Without an
endpoint, default mode stays as it was: no spans, no audit files.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from test_cli_otlp import Collector, _cli, _env, run_scheduler_until_it_purges
from test_cli_otlp import collector as collector  # the receiver fixture, shared

from governed_memory import Governance, NullAuditSink, Settings


def _files(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def test_a_cli_command_under_the_default_policy_exports_spans_and_writes_no_log(
    workspace: Path, collector: Collector
) -> None:
    env = _env(OTEL_EXPORTER_OTLP_ENDPOINT=collector.url)
    done = subprocess.run(
        _cli(workspace, None, "consent", "grant", "--subject", "s-1", "--purpose", "persist"),
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    names = [name for _, name in collector.spans()]
    assert "governed_memory consent.grant" in names
    assert not [f for f in _files(workspace) if "audit" in f]


def test_the_scheduler_daemon_with_audit_off_exports_its_purge_spans(
    workspace: Path, tmp_path: Path, collector: Collector
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(
        '[policy]\nid = "plain"\nversion = "1"\n\n[audit]\nenabled = false\n\n'
        '[retention]\narchives_max_age = "30d"\n\n[schedule]\npurge_interval = "1d"\n'
    )
    env = _env(GOVERNED_MEMORY_OTLP_ENDPOINT=collector.url, GOVERNED_MEMORY_SERVICE_NAME="sched")
    run_scheduler_until_it_purges(
        _cli(workspace, policy, "scheduler", "run", "--leader-retry", "0.2"), env
    )
    assert ("sched", "delete_memory") in collector.spans()
    assert not [f for f in _files(workspace) if "audit" in f]


def test_an_endpoint_makes_the_default_sink_a_spans_only_trail(workspace: Path) -> None:
    governance = Governance(
        workspace=workspace, settings=Settings(otlp_endpoint="http://127.0.0.1:9")
    )
    assert type(governance.audit).__name__ == "PolicyLoadSink"
    assert governance.audit.log is None  # type: ignore[attr-defined]


def test_without_an_endpoint_the_default_policy_keeps_the_null_sink(workspace: Path) -> None:
    assert isinstance(Governance(workspace=workspace).audit, NullAuditSink)
