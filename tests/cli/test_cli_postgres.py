"""The inspection, key and demo commands on a PostgreSQL deployment, through the entry point.

Each test runs the CLI with GOVERNED_MEMORY_DATABASE_URL set (the regulated
policy, its keys from the environment as a host gets them) against a fresh
database of the test server, and checks that nothing is written under
WORKSPACE_DIR.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from click.testing import CliRunner
from sealing_helpers import TEST_MASTER_KEY_B64

from governed_memory import LocalSigningKey, generate_master_key
from governed_memory._crypto import LocalKeyProvider


class Deployment:
    """The environment of one host of a database deployment, and the CLI run in it."""

    def __init__(self, url: str, tmp_path: Path) -> None:
        self.url = url
        self.workspace = tmp_path / "ws"
        self.env = {
            "GOVERNED_MEMORY_DATABASE_URL": url,
            "GOVERNED_MEMORY_AUDIT_KEY": "ab" * 32,
            "GOVERNED_MEMORY_MASTER_KEY": TEST_MASTER_KEY_B64,
            "GOVERNED_MEMORY_SIGNING_KEY": LocalSigningKey.generate().to_base64(),
            "WORKSPACE_DIR": str(self.workspace),
        }

    def run(self, *args: str, **env: str) -> tuple[int, str, str]:
        from governed_memory._cli import main

        result = CliRunner().invoke(main, ["--policy", "regulated", *args], env={**self.env, **env})
        return result.exit_code, result.stdout, result.stderr

    def ok(self, *args: str, **env: str) -> str:
        code, out, err = self.run(*args, **env)
        assert code == 0, err
        return out

    def dump(self) -> str:
        """Every row of the governed_memory schema as text (what a pg_dump would hold)."""
        with psycopg.connect(self.url) as conn:
            tables = conn.execute(
                "SELECT table_name FROM information_schema.tables "
                "WHERE table_schema = 'governed_memory'"
            ).fetchall()
            rows = []
            for (table,) in tables:
                for row in conn.execute(f'SELECT * FROM governed_memory."{table}"'):
                    rows.append(" ".join(map(repr, row)))
        return "\n".join(rows)


@pytest.fixture
def host(pg_url: str, tmp_path: Path) -> Iterator[Deployment]:
    deployment = Deployment(pg_url, tmp_path)
    deployment.ok("db", "upgrade")
    yield deployment
    assert not deployment.workspace.exists()  # nothing on the local disk


def _demo_agent(host: Deployment) -> str:
    out = host.ok("demo", "--keep")
    agents = json.loads(host.ok("agents", "--json"))
    assert len(agents) == 1 and agents[0]["name"] in out
    return str(agents[0]["name"])


def test_the_demo_runs_on_the_database_and_stores_only_ciphertext(host: Deployment) -> None:
    out = host.ok("demo")
    assert "PostgreSQL at" in out and "In the database" in out
    assert "encrypted, as the deployment's policy" in out
    assert "Dana Reyes" in out and "archive/" in out  # the texts read back through the store
    assert "was removed from" in out
    assert json.loads(host.ok("agents", "--json")) == []  # removed at the end
    name = _demo_agent(host)
    assert name.startswith("PaymentsAssistant-")
    dump = host.dump()
    assert "Dana Reyes" not in dump and "Harbour Lettings" not in dump  # ciphertext only


def test_the_demo_on_a_database_without_the_schema_names_the_upgrade(
    pg_server: object, tmp_path: Path
) -> None:
    url = pg_server.url(pg_server.create_database())  # type: ignore[attr-defined]
    code, out, err = Deployment(url, tmp_path).run("demo")
    assert code == 1 and "Traceback" not in err
    line = err.strip()
    assert "\n" not in line and "governed-memory db upgrade" in line
    assert "Session 1" not in out  # refused before the cycle starts
    assert not (tmp_path / "ws").exists()


def test_agents_and_show_read_through_the_database(host: Deployment) -> None:
    name = _demo_agent(host)
    [info] = json.loads(host.ok("agents", "--json"))
    assert info["folder"] is None and info["archives"] == 1 and info["messages"] == 1
    assert info["size_bytes"] > 0 and info["last_activity"]
    table = host.ok("agents")
    assert "Agents in PostgreSQL at" in table and name in table
    shown = json.loads(host.ok("show", name, "--archives", "--json"))
    contents = [r["content"] for r in shown["records"]]
    assert shown["folder"] is None and len(contents) == 8
    assert any("Harbour Lettings" in c for c in contents)
    assert [r["archived"] for r in shown["records"]] == [True] * 7 + [False]
    text = host.ok("show", name)
    assert f"{name} in PostgreSQL at" in text and "1 archive is not shown" in text
    code, _, err = host.run("show", "Nobody")
    assert code == 1 and "has no memory in PgMemoryBackend(" in err and "\n" not in err.strip()


def test_keys_status_and_rotate_on_the_database(host: Deployment) -> None:
    _demo_agent(host)  # creates data keys
    old_id = LocalKeyProvider.from_base64(TEST_MASTER_KEY_B64).key_id
    status = json.loads(host.ok("keys", "status", "--json"))
    assert status["exists"] and "wrapped keys only" in status["folder"]
    assert status["master_key_id"] == old_id and status["keys"]
    assert set(status["by_master_key"]) == {old_id}
    new = generate_master_key()
    new_id = LocalKeyProvider.from_base64(new).key_id
    rotated = {
        "GOVERNED_MEMORY_MASTER_KEY": new,
        "GOVERNED_MEMORY_MASTER_KEY_OLD": TEST_MASTER_KEY_B64,
    }
    code, _, err = host.run("keys", "rotate", "--reencrypt", "--json", **rotated)
    assert code == 1 and "nothing was changed" in err and "\n" not in err.strip()
    assert json.loads(host.ok("keys", "status", "--json"))["by_master_key"] == {
        old_id: len(status["keys"]) + 1  # every data key and the index key, still the old key's
    }
    report = json.loads(host.ok("keys", "rotate", "--json", **rotated))
    assert report["rewrapped"] == len(status["keys"]) + 1 and report["from_key_ids"] == [old_id]
    after = json.loads(host.ok("keys", "status", "--json", GOVERNED_MEMORY_MASTER_KEY=new))
    assert set(after["by_master_key"]) == {new_id}
    # The memory still reads under the new key alone.
    agents = json.loads(host.ok("agents", "--json", GOVERNED_MEMORY_MASTER_KEY=new))
    assert agents[0]["messages"] == 1


def _connections(url: str) -> int:
    """Client connections to the test's database other than this one, once closed ones are gone.

    A server process ends a moment after its client closed the connection, so a
    busy machine can still list one just closed: polled for up to 5 s (a connection
    left open is still listed then).
    """
    deadline = time.monotonic() + 5
    with psycopg.connect(url, autocommit=True) as conn:
        while True:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()
            assert row is not None
            if int(row[0]) == 0 or time.monotonic() > deadline:
                return int(row[0])
            time.sleep(0.05)


def test_a_command_closes_the_database_connections_it_opened(host: Deployment) -> None:
    """The demo and `keys status` build storages of their own: closed when the command ends."""
    _demo_agent(host)
    import governed_memory._wiring as wiring

    for gov in list(wiring._SHARED.values()):  # `agents`: the process's shared Governance,
        gov.storage.close()  # which lives as long as its process (reopened when used again)
    assert _connections(host.url) == 0
    json.loads(host.ok("keys", "status", "--json"))
    host.ok("demo")
    assert _connections(host.url) == 0


@pytest.mark.parametrize("command", ["encrypt-workspace", "decrypt-workspace"])
def test_a_workspace_file_command_on_the_database_is_refused_naming_the_fix(
    host: Deployment, command: str
) -> None:
    _demo_agent(host)
    before = host.dump()
    code, _, err = host.run(command)
    line = err.strip()
    assert code == 1 and "Traceback" not in err and "\n" not in line
    assert "works on the file backend only" in line and "GOVERNED_MEMORY_DATABASE_URL" in line
    assert host.dump() == before  # nothing changed


def test_isolate_subjects_runs_on_the_database_and_is_audited(host: Deployment) -> None:
    """The regulated demo isolates subjects as it writes: nothing to move, every agent read."""
    name = _demo_agent(host)
    dry = json.loads(host.ok("isolate-subjects", "--dry-run", "--json"))
    assert dry == {"dry_run": True, "isolation": "subject", "agents": {name: 0}, "records": 0}
    done = json.loads(host.ok("isolate-subjects", "--json"))
    assert done["agents"] == {name: 0} and not done["dry_run"]
    tail = json.loads(host.ok("audit", "tail", "--json", "-n", "5"))
    isolated = [e["attrs"] for e in tail if e["event"] == "memory.isolate"]
    assert len(isolated) == 1 and isolated[0]["moved"] == 0 and isolated[0]["outcome"] == "ok"
    assert "agent.hash" in isolated[0] and name not in json.dumps(tail)  # (pseudonymised)
