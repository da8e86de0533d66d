"""Every command, hostile arguments and environment: no traceback, exit 0/1/2, no write outside.

The command tree is walked recursively, so a command added later is fuzzed
too. Each example runs one command through the real entry point in a
workspace that earlier examples keep changing (a hostile sequence), with
huge and negative numbers, lone surrogates, control characters, path
traversal, ``/dev/null``, very long and empty strings in its arguments and
in ``GOVERNED_MEMORY_*`` variables. After each run every file outside the
workspace (a sentinel folder beside it, the temporary parent) is unchanged.

Path options (``--out``, ``--dir``) get hostile names *inside* the workspace:
writing where the operator points them is their job. ``scheduler run`` is
left out: it runs until a signal.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import click
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from governed_memory._cli import main
from governed_memory._cli._boundary import walk
from governed_memory._crypto import generate_master_key

SKIPPED = {"scheduler run": "runs until SIGTERM"}
COMMANDS = {
    path: command
    for path, command in walk(main)
    if not isinstance(command, click.Group) and path not in SKIPPED
}

HOSTILE = [
    "",
    " ",
    "-",
    "--",
    ".",
    "..",
    "../../escape",
    "../" * 40 + "etc/passwd",
    "/etc/passwd",
    "/dev/null",
    "a/b",
    "A\\..\\x",
    "\udcff",
    "a\udc80b",
    "\ud800",
    "nul\x00byte",
    "\x1b[31mred\x1b[0m",
    "line\r\nbreak",
    "\t\x07\x08\x7f",
    "[b]markup[/b] [/x]",
    "%s%n{0}${HOME}",
    "\u202eevil",
    "x" * 5000,
    "9" * 400,
    "9999999999999y",
    "99999999d",
    "1e20",
    "-1",
    "-9999999999999999999999",
    "0",
    "nan",
    "inf",
    "forever",
    "2026-13-45",
    "0001-01-01",
    "9999-12-31T23:59:59",
]
TEXT_ALPHABET = st.one_of(
    st.characters(max_codepoint=0x2FFF), st.sampled_from("\x00\x01\x1b\r\n\udcff\ud800/.\\")
)
hostile_text = st.one_of(st.sampled_from(HOSTILE), st.text(TEXT_ALPHABET, max_size=30))
hostile_number = st.one_of(
    st.sampled_from(["-1", "0", "1", "9" * 30, "1e20", "-0", "nan", "inf", "2.5", "0x10"]),
    st.integers().map(str),
)
# What the operating system lets into argv and the environment: no NUL, and
# non-UTF-8 bytes arrive as surrogates in U+DC80..U+DCFF.
env_text = st.one_of(
    st.sampled_from([h for h in HOSTILE if "\x00" not in h and "\ud800" not in h]),
    st.text(
        st.characters(exclude_characters="\x00", max_codepoint=0xFFFF).filter(
            lambda c: not "\ud800" <= c < "\udc80" and not "\udd00" <= c <= "\udfff"
        ),
        max_size=20,
    ),
)

ENV_NAMES = [
    "GOVERNED_MEMORY_POLICY",
    "GOVERNED_MEMORY_MASTER_KEY",
    "GOVERNED_MEMORY_MASTER_KEY_OLD",
    "GOVERNED_MEMORY_AUDIT_KEY",
    "GOVERNED_MEMORY_SERVICE_NAME",
    "GOVERNED_MEMORY_ENCRYPTION__ENABLED",
    "GOVERNED_MEMORY_RETENTION__ARCHIVES_MAX_AGE",
    "GOVERNED_MEMORY_CONSENT__ERASE_GRACE",
    "GOVERNED_MEMORY_CONSENT__REQUIRED_FOR",
    "GOVERNED_MEMORY_AUDIT__ENABLED",
]


def _value(param: click.Parameter, workspace: Path) -> st.SearchStrategy[str]:
    kind = param.type
    if isinstance(kind, click.Path):
        # Inside the workspace, by a hostile name; or a device, or nothing.
        inside = env_text.filter(lambda t: "/" not in t and ".." not in t)
        return st.one_of(
            inside.map(lambda t: str(workspace / "out" / (t or "empty"))),
            st.sampled_from([os.devnull, str(workspace), str(workspace / "nope" / "x")]),
        )
    if isinstance(kind, click.IntRange | click.FloatRange) or kind in (click.INT, click.FLOAT):
        return hostile_number
    if isinstance(kind, click.Choice):
        return st.one_of(st.sampled_from(list(kind.choices)), hostile_text)
    return hostile_text


@st.composite
def invocation(draw: st.DrawFn, workspace: Path) -> tuple[list[str], dict[str, str]]:
    path = draw(st.sampled_from(sorted(COMMANDS)))
    args = path.split()
    for param in COMMANDS[path].params:
        if isinstance(param, click.Argument):
            args.append(draw(_value(param, workspace)))
            continue
        assert isinstance(param, click.Option)
        if param.name == "help" or not (param.required or draw(st.booleans())):
            continue
        if param.is_flag:
            args.append(param.opts[0])
        else:
            args += [param.opts[0], draw(_value(param, workspace))]
    # The environment and the policy are hostile in one example out of four, so
    # that most examples reach the command itself.
    env: dict[str, str] = {}
    if draw(st.integers(0, 3)) == 0:
        env = {
            name: draw(env_text | st.just(generate_master_key()))
            for name in draw(st.lists(st.sampled_from(ENV_NAMES), max_size=2, unique=True))
        }
        env["GOVERNED_MEMORY_KEYRING_DIR"] = draw(
            st.sampled_from([os.devnull, "", str(workspace / "kr"), str(workspace / "f" / "x")])
        )
    policy = None
    if draw(st.integers(0, 3)) == 0:
        policy = draw(st.sampled_from(["regulated", "hipaa", "nope", os.devnull, ""]))
    front = ["--workspace", str(workspace)] + (["--policy", policy] if policy is not None else [])
    return front + args, env


def _snapshot(root: Path, skip: Path) -> dict[str, tuple[int, int, bytes]]:
    """Every file and folder under ``root`` outside ``skip``: mode, size, content."""
    found: dict[str, tuple[int, int, bytes]] = {}
    for folder, dirs, files in os.walk(root):
        if Path(folder) == skip or skip in Path(folder).parents:
            dirs[:] = []
            continue
        for name in dirs + files:
            item = Path(folder, name)
            if item == skip:
                continue
            st_ = item.lstat()
            data = item.read_bytes() if item.is_file() and not item.is_symlink() else b""
            found[str(item)] = (st_.st_mode, st_.st_size, data)
    return found


@contextmanager
def _arena() -> Iterator[tuple[Path, Path]]:
    with tempfile.TemporaryDirectory() as tmp:
        parent = Path(tmp)
        workspace = parent / "ws"
        sentinel = parent / "sentinel"
        sentinel.mkdir()
        (sentinel / "passwd").write_text("root:x:0:0\n", encoding="utf-8")
        (parent / "escape").mkdir()
        runner = CliRunner()
        assert runner.invoke(main, ["--workspace", str(workspace), "demo"]).exit_code == 0
        for args in (
            ["consent", "grant", "--subject", "s1", "--purpose", "persist"],
            ["hold", "place", "--subject", "s9", "--reason", "case 1"],
            ["erase", "--subject", "s2", "--grace", "30d"],
        ):
            assert runner.invoke(main, ["--workspace", str(workspace), *args]).exit_code == 0
        (workspace / "f").write_text("a file where a folder is expected\n", encoding="utf-8")
        cwd = Path.cwd()
        os.chdir(workspace)  # relative paths land in the workspace
        try:
            yield parent, workspace
        finally:
            os.chdir(cwd)


def test_every_command_survives_hostile_arguments_and_environment() -> None:
    with _arena() as (parent, workspace):
        before = _snapshot(parent, workspace)

        @settings(
            max_examples=300,
            deadline=None,
            derandomize=True,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        )
        @given(invocation(workspace))
        def run(call: tuple[list[str], dict[str, str]]) -> None:
            args, env = call
            result = CliRunner().invoke(main, args, env=env, input="")
            output = result.output  # stdout and stderr as a terminal shows them
            where = f"governed-memory {args!r} with {env!r}"
            assert result.exception is None or isinstance(result.exception, SystemExit), (
                f"{where} raised {result.exception!r}"
            )
            assert "Traceback" not in output, where
            assert "error: unexpected" not in output, f"{where}: {output}"
            assert result.exit_code in (0, 1, 2), f"{where} exited {result.exit_code}"
            assert _snapshot(parent, workspace) == before, f"{where} wrote outside the workspace"

        run()
