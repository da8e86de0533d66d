"""The test environment is cleared of the standard OTEL_* variables, as of GOVERNED_MEMORY_* ones.

A developer machine that sets OTEL_EXPORTER_OTLP_ENDPOINT must not make the
in-process CLI tests export spans (tests/conftest.py ``_isolated_env``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from governed_memory import Settings


def test_no_otel_variable_reaches_a_test() -> None:
    assert not [name for name in os.environ if name.upper().startswith("OTEL_")]
    assert Settings().otlp_endpoint is None


def test_a_developer_otel_endpoint_does_not_reach_the_tests() -> None:
    """Runs the test above in a pytest whose environment sets the standard variables."""
    here = Path(__file__)
    env = dict(
        os.environ,
        OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9",
        OTEL_SERVICE_NAME="developer",
    )
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:xdist",
            "-p",
            "no:cacheprovider",
            f"{here}::test_no_otel_variable_reaches_a_test",
        ],
        cwd=here.parents[2],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
