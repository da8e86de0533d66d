"""governed-memory installs next to each framework's pinned version without changing its packages.

The environments are built by ``frameworks.py`` (the README's test command runs it before
pytest, since it installs from the package index); these tests only read them, offline.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from frameworks import FRAMEWORKS, Framework
from packaging.version import Version

PARAMS = [pytest.param(f, id=f.name) for f in FRAMEWORKS]


def _frozen(text: str) -> dict[str, str]:
    """``pip freeze`` lines -> {normalised name: version} (editable installs left out)."""
    found = {}
    for line in text.splitlines():
        if "==" in line and not line.startswith(("-e", "#")):
            name, version = line.split("==", 1)
            found[name.lower().replace("_", "-")] = version.strip()
    return found


@pytest.fixture(params=PARAMS)
def framework(request: pytest.FixtureRequest) -> Framework:
    framework: Framework = request.param
    assert framework.ready(), (
        f"{framework.folder} is missing or was built from another pyproject.toml: "
        "run `.venv/bin/python tests/integrations/frameworks.py` (the README's test command does)"
    )
    return framework


def test_pip_check_passes_with_ours_installed(framework: Framework) -> None:
    done = subprocess.run(
        [str(framework.python), "-m", "pip", "check"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_installing_ours_changes_none_of_the_frameworks_packages(framework: Framework) -> None:
    alone = _frozen(framework.alone.read_text(encoding="utf-8"))
    with_ours = _frozen(framework.with_ours.read_text(encoding="utf-8"))
    changed = {
        name: f"{version} -> {with_ours.get(name, 'removed')}"
        for name, version in alone.items()
        if with_ours.get(name) != version
    }
    assert changed == {}, f"installing governed-memory next to {framework.pin} changed {changed}"
    name, pinned = framework.pin.split("==")
    assert alone[name] == pinned


def test_cryptography_is_the_one_the_framework_brings(framework: Framework) -> None:
    """The case the issue found: our range stopped below 50 and downgraded swarms' 50.0.2."""
    alone = _frozen(framework.alone.read_text(encoding="utf-8"))
    with_ours = _frozen(framework.with_ours.read_text(encoding="utf-8"))
    assert with_ours["cryptography"] == alone["cryptography"]
    assert Version(with_ours["cryptography"]) >= Version("50")


def test_the_integration_imports_beside_the_framework_alone(
    framework: Framework, tmp_path: Path
) -> None:
    """No dev dependency is needed: the extra brings everything the integration imports."""
    done = subprocess.run(
        [str(framework.python), "-c", f"import {framework.module}"],
        capture_output=True,
        text=True,
        cwd=tmp_path,  # swarms creates its workspace folder on import
        env={
            "SWARMS_TELEMETRY_ON": "false",
            "WORKSPACE_DIR": str(tmp_path),
            "PATH": "/usr/bin:/bin",
        },
    )
    assert done.returncode == 0, done.stderr[-3000:]
