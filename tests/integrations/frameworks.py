"""Virtual environments of each framework alone, then with governed-memory installed next to it.

Run by the README's test command before pytest (``python tests/integrations/frameworks.py``),
because it installs from the package index and tests never reach the network. For each
framework it creates ``.cache/framework-envs/<name>/``: a fresh virtual environment in which
the framework's pinned version is installed alone (``pip freeze`` -> ``alone.txt``), then
governed-memory with that framework's extra (``pip freeze`` -> ``with-ours.txt``).
``test_dependencies.py`` then checks, offline, that ``pip check`` passes there and that
installing ours changed none of the framework's packages (but one that a package only
ours brings pins exactly: OpenTelemetry's SDK pins its API to its own version).

An environment is kept while its inputs are the same (pyproject.toml, the pin, the Python
version), so a second run installs nothing; ``--force`` rebuilds them all.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ENVS = ROOT / ".cache" / "framework-envs"
PYPROJECT = ROOT / "pyproject.toml"


@dataclass(frozen=True)
class Framework:
    """One framework: the pin the tests check against and governed-memory's extra for it."""

    name: str
    pin: str
    extra: str
    module: str  # the governed_memory integration to import in the environment

    @property
    def folder(self) -> Path:
        return ENVS / self.name

    @property
    def python(self) -> Path:
        return self.folder / "bin" / "python"

    @property
    def alone(self) -> Path:
        return self.folder / "alone.txt"

    @property
    def with_ours(self) -> Path:
        return self.folder / "with-ours.txt"

    @property
    def key_file(self) -> Path:
        return self.folder / "inputs.sha256"

    def key(self) -> str:
        digest = hashlib.sha256()
        digest.update(PYPROJECT.read_bytes())
        digest.update(self.pin.encode())
        digest.update(sys.version.encode())
        return digest.hexdigest()

    def ready(self) -> bool:
        try:
            return self.key_file.read_text(encoding="utf-8").strip() == self.key()
        except FileNotFoundError:
            return False


FRAMEWORKS = (
    Framework("swarms", "swarms==16.0.3", "swarms", "governed_memory.integrations.swarms"),
    Framework(
        "openai-agents",
        "openai-agents==0.24.0",
        "openai-agents",
        "governed_memory.integrations.openai_agents",
    ),
)


def _pip(framework: Framework, *args: str) -> str:
    done = subprocess.run(
        [str(framework.python), "-m", "pip", "--disable-pip-version-check", *args],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise SystemExit(
            f"frameworks.py: pip {' '.join(args)} failed in {framework.folder} "
            f"(exit {done.returncode}):\n{done.stdout[-2000:]}{done.stderr[-4000:]}"
        )
    return done.stdout


def build(framework: Framework) -> None:
    """Create the framework's environment anew: framework alone, frozen, then ours, frozen."""
    shutil.rmtree(framework.folder, ignore_errors=True)
    framework.folder.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "venv", str(framework.folder)], check=True)
    _pip(framework, "install", "-q", framework.pin)
    framework.alone.write_text(_pip(framework, "freeze", "--all"), encoding="utf-8")
    # Editable, so the environment imports the code under test, not a copy of an older commit.
    _pip(framework, "install", "-q", "-e", f"{ROOT}[{framework.extra}]")
    framework.with_ours.write_text(_pip(framework, "freeze", "--all"), encoding="utf-8")
    framework.key_file.write_text(framework.key() + "\n", encoding="utf-8")


def main(argv: list[str]) -> int:
    force = "--force" in argv
    for framework in FRAMEWORKS:
        if framework.ready() and not force:
            print(f"frameworks.py: {framework.name}: {framework.folder} is up to date")
            continue
        print(f"frameworks.py: {framework.name}: building {framework.folder} ...", flush=True)
        build(framework)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
