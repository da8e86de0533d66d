"""governed-memory installs next to each framework's pinned version without changing its packages.

The environments are built by ``frameworks.py`` (the README's test command runs it before
pytest, since it installs from the package index); these tests only read them, offline.
"""

from __future__ import annotations

import json
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


# The pins each installed distribution declares exactly (``name==version``), read in the
# framework's environment: {pinned package: [(requirer, version), ...]}.
_EXACT_PINS = r"""
import importlib.metadata as m, json, re
pins = {}
for dist in m.distributions():
    for req in dist.requires or []:
        if ";" in req and "extra ==" in req.split(";", 1)[1]:
            continue  # an extra's requirement: not installed because of it
        found = re.fullmatch(r"\s*([A-Za-z0-9._-]+)\s*\(?\s*==\s*([^,;()\s]+)\s*\)?\s*(;.*)?", req)
        if found:
            name = re.sub(r"[-_.]+", "-", found.group(1)).lower()
            requirer = re.sub(r"[-_.]+", "-", dist.metadata["Name"]).lower()
            pins.setdefault(name, []).append((requirer, found.group(2)))
print(json.dumps(pins))
"""


def _exact_pins(framework: Framework) -> dict[str, list[tuple[str, str]]]:
    done = subprocess.run(
        [str(framework.python), "-c", _EXACT_PINS], capture_output=True, text=True, check=True
    )
    return {k: [tuple(p) for p in v] for k, v in json.loads(done.stdout).items()}  # type: ignore[misc]


def test_installing_ours_changes_none_of_the_frameworks_packages(framework: Framework) -> None:
    """None of the framework's packages changes, except one a package that only ours brings
    pins exactly and at the version found (OpenTelemetry's SDK pins its API to its own
    version: an index holding a newer API than any SDK moves the API back to the SDK's)."""
    alone = _frozen(framework.alone.read_text(encoding="utf-8"))
    with_ours = _frozen(framework.with_ours.read_text(encoding="utf-8"))
    changed = {
        name: f"{version} -> {with_ours.get(name, 'removed')}"
        for name, version in alone.items()
        if with_ours.get(name) != version
    }
    if changed:
        pins = _exact_pins(framework)
        brought = {name for name in with_ours if name not in alone}  # (by installing ours)
        changed = {
            name: change
            for name, change in changed.items()
            if not any(
                requirer in brought and version == with_ours.get(name)
                for requirer, version in pins.get(name, [])
            )
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
