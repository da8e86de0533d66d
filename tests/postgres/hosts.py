"""Several "hosts" sharing one database: processes with local folders of their own.

A :class:`Host` is what a second machine of a deployment has: its own working
folder (the current directory, ``WORKSPACE_DIR``, ``TMPDIR`` and ``HOME`` all
inside it, so nothing on one host's disk is seen by another), and the same
settings as every other host: the database URL, the policy and the keys, in its
environment. It runs the CLI (:meth:`Host.cli`) and a long-lived Python process
(:meth:`Host.start`) in which a test runs statements one at a time
(:meth:`Live.run`), as a live agent on that host would.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["Host", "Live", "RemoteError"]

_SERVER = r"""
import json, sys, traceback
namespace = {}
exec("from governed_memory import *", namespace)
for line in sys.stdin:
    request = json.loads(line)
    try:
        if request.get("eval"):
            value = eval(request["code"], namespace)
        else:
            exec(request["code"], namespace)
            value = None
        reply = {"ok": True, "value": value if isinstance(value, (str, int, float, bool, list, dict, type(None))) else repr(value)}
    except BaseException as exc:
        reply = {"ok": False, "type": type(exc).__name__, "message": str(exc),
                 "mro": [c.__name__ for c in type(exc).__mro__],
                 "traceback": traceback.format_exc()}
    sys.stdout.write(json.dumps(reply) + "\n")
    sys.stdout.flush()
"""


class RemoteError(Exception):
    """A statement run on a host raised; ``type`` and ``mro`` name the exception there."""

    def __init__(self, reply: Mapping[str, Any]) -> None:
        super().__init__(f"{reply['type']}: {reply['message']}\n{reply.get('traceback', '')}")
        self.type: str = reply["type"]
        self.mro: list[str] = list(reply["mro"])
        self.message: str = reply["message"]


class Live:
    """A running Python process on a host, executing statements sent by the test."""

    def __init__(self, process: subprocess.Popen[str]) -> None:
        self.process = process

    def _send(self, code: str, *, evaluate: bool) -> Any:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(json.dumps({"code": code, "eval": evaluate}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the host process exited ({self.process.wait()})")
        reply = json.loads(line)
        if not reply["ok"]:
            raise RemoteError(reply)
        return reply["value"]

    def run(self, code: str) -> None:
        """Execute statements in the host's namespace (``from governed_memory import *`` done)."""
        self._send(code, evaluate=False)

    def eval(self, expression: str) -> Any:
        """The value of an expression (JSON-able values as they are, others as their repr)."""
        return self._send(expression, evaluate=True)

    def kill(self) -> None:
        """kill -9: the process ends without running any cleanup."""
        self.process.kill()
        self.process.wait()
        self._close_pipes()

    def _close_pipes(self) -> None:
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()

    def close(self) -> None:
        if self.process.poll() is None:
            assert self.process.stdin is not None
            self.process.stdin.close()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()
        self._close_pipes()


class Host:
    """One host of a deployment: a folder of its own and the deployment's shared settings."""

    def __init__(self, root: Path, name: str, settings: Mapping[str, str]) -> None:
        self.name = name
        self.folder = root / name
        self.workspace = self.folder / "workspace"
        for sub in (self.workspace, self.folder / "tmp", self.folder / "home"):
            sub.mkdir(parents=True, exist_ok=True)
        self.env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("GOVERNED_MEMORY_", "PG", "OTEL_"))
        }
        self.env.update(
            WORKSPACE_DIR=str(self.workspace),
            TMPDIR=str(self.folder / "tmp"),
            HOME=str(self.folder / "home"),
            PYTHONDONTWRITEBYTECODE="1",
        )
        self.env.update(settings)
        self.lives: list[Live] = []

    def cli(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        """Run ``governed-memory ARGS`` on this host; raises with its output when it fails and ``check``."""
        done = subprocess.run(
            [str(Path(sys.executable).parent / "governed-memory"), *args],
            cwd=self.folder,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        if check and done.returncode != 0:
            raise AssertionError(
                f"{self.name}: governed-memory {' '.join(args)} exited {done.returncode}\n"
                f"stdout: {done.stdout}\nstderr: {done.stderr}"
            )
        return done

    def start(self) -> Live:
        """A long-lived Python process on this host (closed by :meth:`close`)."""
        process = subprocess.Popen(
            [sys.executable, "-c", _SERVER],
            cwd=self.folder,
            env=self.env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        live = Live(process)
        self.lives.append(live)
        return live

    def local_files(self) -> list[Path]:
        """Every file under this host's workspace folder (memory must leave none)."""
        return sorted(p for p in self.workspace.rglob("*") if p.is_file())

    def close(self) -> None:
        for live in self.lives:
            live.close()
