"""docs/postgres.md's roles, run as written: the owner upgrades, the application role runs everything.

The SQL blocks of the page (creating the roles and the database, then the
application role's grants) are executed verbatim, the role and database
names made unique. Then a whole governed life cycle runs as the application
role, through the API and the CLI, and the role still cannot rewrite the
audit history. A grant the page forgets fails this test.
"""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path
from urllib.parse import urlsplit

import psycopg
import pytest
from click.testing import CliRunner
from crypto_helpers import TEST_MASTER_KEY
from sealing_helpers import TEST_MASTER_KEY_B64

from governed_memory import (
    Conversation,
    FixedClock,
    Governance,
    LocalKeyProvider,
    LocalSigningKey,
    Retention,
    Settings,
    erase,
    export_subject,
    load_policy,
    memory_md_path,
)
from governed_memory._audit import verify_storage

DOC = Path(__file__).parents[2] / "docs" / "postgres.md"
AUDIT_KEY = "cd" * 32
SIGNING_KEY = LocalSigningKey.generate().to_base64()


def _sql_blocks() -> list[str]:
    text = DOC.read_text(encoding="utf-8")
    return [m.group(1) for m in re.finditer(r"```sql\n(.*?)```", text, flags=re.S)]


def _statements(block: str, names: dict[str, str]) -> list[str]:
    lines = [re.sub(r"--.*$", "", line) for line in block.splitlines()]
    text = "\n".join(lines)
    for old, new in names.items():
        text = re.sub(rf"\b{old}\b", new, text)
    return [s.strip() for s in text.split(";") if s.strip()]


def _run(url: str, statements: list[str]) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement)  # type: ignore[arg-type]


def _as(url: str, role: str, database: str) -> str:
    parts = urlsplit(url)
    return f"postgresql://{role}@/{database}?{parts.query}"


@pytest.fixture
def roles(pg_server: object) -> dict[str, str]:
    """The page's roles and database, created by its set-up block; the URLs of both roles."""
    url = pg_server.url()  # type: ignore[attr-defined]
    suffix = pg_server.create_database()  # type: ignore[attr-defined]  # a fresh, unique name
    names = {
        "gm_owner": f"{suffix}_owner",
        "gm_app": f"{suffix}_app",
        "governed_memory": f"{suffix}_gm",
    }
    setup, grants = _sql_blocks()
    assert "CREATE ROLE gm_app" in setup and "GRANT" in grants
    _run(url, _statements(setup, names))
    database = names["governed_memory"]
    owner = _as(url, names["gm_owner"], database)
    # Only the database's name is replaced in the grants: the schema keeps its name.
    grant_names = {"gm_owner": names["gm_owner"], "gm_app": names["gm_app"]}
    return {
        "owner": owner,
        "app": _as(url, names["gm_app"], database),
        "grants": ";".join(_statements(grants, grant_names)),
    }


def _cli(url: str, *args: str) -> str:
    from governed_memory._cli import main

    env = {
        "GOVERNED_MEMORY_DATABASE_URL": url,
        "GOVERNED_MEMORY_AUDIT_KEY": AUDIT_KEY,
        "GOVERNED_MEMORY_MASTER_KEY": TEST_MASTER_KEY_B64,
        "GOVERNED_MEMORY_SIGNING_KEY": SIGNING_KEY,
    }
    result = CliRunner().invoke(main, ["--policy", "regulated", *args], env=env)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_the_documented_grants_suffice_for_a_governed_life_cycle_and_keep_the_audit_append_only(
    roles: dict[str, str], tmp_path: Path
) -> None:
    _cli(roles["owner"], "db", "upgrade")
    _run(roles["owner"], roles["grants"].split(";"))
    app = roles["app"]
    assert "schema" in _cli(app, "db", "status").lower()

    clock = FixedClock(dt.datetime.now().replace(microsecond=0), tick=dt.timedelta(milliseconds=1))
    gov = Governance(
        workspace=tmp_path / "ws",
        policy=load_policy("regulated"),
        settings=Settings(database_url=app, audit_key=AUDIT_KEY, signing_key=SIGNING_KEY),
        clock=clock,
        key_provider=LocalKeyProvider(TEST_MASTER_KEY),
    )
    try:
        for subject in ("alice", "bob"):
            gov.grant(subject, "persist", actor="dpo@example.org")
            conversation = Conversation(
                name=f"A_{subject}",
                memory_md_path=memory_md_path("A", gov.workspace),
                governance=gov,
                subject_id=subject,
            )
            conversation.add("Human", f"{subject}'s first message")
            conversation.compact("a summary")  # archived: aged 40 days below
            conversation.add("Human", f"{subject}'s second message")
            conversation.memory_md_path = None
        export_subject(gov, "alice", tmp_path / "export", actor="dpo@example.org")
        retention = Retention(gov)
        hold = retention.holds.place(agent="A", reason="litigation", actor="legal@example.org")
        retention.holds.release(hold_id=hold.id, actor="legal@example.org")
        receipt = erase(gov, subject="alice", reason="art. 17", actor="dpo@example.org")
        assert receipt.state == "complete" and receipt.keys_shredded  # crypto-shredding
        clock.advance(dt.timedelta(days=40))
        report = retention.purge()
        assert report.failed == 0, report.errors
        assert report.deleted.get("archives_max_age", 0) >= 1
        log = getattr(gov.audit, "log", None)
        assert log is not None and verify_storage(log, [bytes.fromhex(AUDIT_KEY)]).ok
    finally:
        gov.storage.close()
    assert _cli(app, "audit", "verify").startswith("OK: ")
    assert "was removed from" in _cli(app, "demo")
    _cli(app, "scheduler", "status")  # the page's monitoring commands run as the role too

    for statement, refusal in (
        ("UPDATE governed_memory.audit_entries SET event = 'x'", "permission denied"),
        ("DELETE FROM governed_memory.audit_entries", "permission denied"),
        ("DROP TABLE governed_memory.audit_entries", "must be owner"),
        ("ALTER TABLE governed_memory.audit_entries DISABLE TRIGGER ALL", "must be owner"),
    ):
        with pytest.raises(psycopg.errors.InsufficientPrivilege, match=refusal):
            _run(app, [statement])


def test_a_missing_grant_is_a_one_line_error_naming_the_roles_section(
    roles: dict[str, str],
) -> None:
    """The application role without the grant on the schema version: named, not 'a bug'."""
    from governed_memory._cli import main

    _cli(roles["owner"], "db", "upgrade")
    _run(roles["owner"], roles["grants"].split(";"))
    app_role = urlsplit(roles["app"]).username
    _run(roles["owner"], [f"REVOKE SELECT ON governed_memory.schema_version FROM {app_role}"])
    env = {
        "GOVERNED_MEMORY_DATABASE_URL": roles["app"],
        "GOVERNED_MEMORY_AUDIT_KEY": AUDIT_KEY,
        "GOVERNED_MEMORY_MASTER_KEY": TEST_MASTER_KEY_B64,
        "GOVERNED_MEMORY_SIGNING_KEY": SIGNING_KEY,
    }
    result = CliRunner().invoke(main, ["--policy", "regulated", "agents"], env=env)
    assert result.exit_code == 1
    message = result.stderr.strip()
    assert len(message.splitlines()) == 1, message
    assert "permission denied" in message and "Roles and least privilege" in message
    assert "bug" not in message.lower()
