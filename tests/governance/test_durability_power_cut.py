"""A simulated power cut: under durability.sync = "commit" no audited message is lost.

Writers (several processes, two threads each, sharing agents and subjects)
add messages under the regulated policy (consent, encryption, subject
isolation, audit) until they are killed with SIGKILL. Their file layer is
a recording double: every ``fsync``/``fdatasync`` notes the file and its
size when the call was made, once the call returned, which is what the
call guarantees is on stable storage. The power cut is then simulated by
rebuilding the workspace from that record alone: a file keeps what was
synced (or what it held at the last full sync before the writers started),
an unsynced file goes back to that state, a new unsynced file is gone.

After the rebuild the audit log is repaired as the next writer would (a torn
last line is closed off) and must verify, and for every agent and subject
the messages the rebuilt memory holds must be at least as many as the
``persist ok`` entries the audit holds: an entry is written only once its
message is durable, so an entry whose message is gone would be a broken
promise. Under "os" the same run loses the audited messages, which shows
the simulation bites.
"""

from __future__ import annotations

import os
import select
import signal
import threading
from collections import Counter
from pathlib import Path

from governed_memory import (
    Conversation,
    Governance,
    Settings,
    generate_master_key,
    memory_md_path,
    parse_memory,
)
from governed_memory._audit import AuditKey, AuditLog, audit_log_dir, verify_log
from governed_memory._policy import load_policy
from governed_memory._policy._model import DurabilityPolicy, Policy, Sync

AUDIT_KEY = "ab" * 32
AGENTS = ("teller", "advisor")
SUBJECTS = ("customer-1", "customer-2")
PROCESSES = 3
ADDS_BEFORE_THE_CUT = 45


def _policy(sync: str) -> Policy:
    regulated = load_policy("regulated")
    return regulated.model_copy(update={"durability": DurabilityPolicy(sync=Sync(sync))})


def _governance(workspace: Path, policy: Policy, master_key: str) -> Governance:
    settings = Settings(master_key=master_key, audit_key=AUDIT_KEY)
    return Governance(workspace=workspace, policy=policy, settings=settings)


def _conversation(gov: Governance, workspace: Path, agent: str, subject: str) -> Conversation:
    return Conversation(
        name=agent,
        governance=gov,
        memory_md_path=memory_md_path(agent, workspace),
        subject_id=subject,
    )


def _snapshot(root: Path) -> dict[Path, bytes]:
    return {p: p.read_bytes() for p in root.rglob("*") if p.is_file()}


def _recording(real: object, journal: int) -> object:
    """``real`` (os.fsync or os.fdatasync), noting ``path<TAB>size`` once it returned.

    The path comes from /proc/self/fd (Linux, as the rest of the crash tests).
    """

    def call(fd: int) -> None:
        size = os.fstat(fd).st_size
        path = os.readlink(f"/proc/self/fd/{fd}")
        real(fd)  # type: ignore[operator]
        os.write(journal, f"{path}\t{size}\n".encode())

    return call


def _writer(workspace: Path, policy: Policy, key: str, journal: int, progress: int, n: int) -> None:
    """A child process: two threads adding messages until the process is killed."""
    os.fsync = _recording(os.fsync, journal)  # type: ignore[assignment]
    os.fdatasync = _recording(os.fdatasync, journal)  # type: ignore[assignment]
    gov = _governance(workspace, policy, key)

    def loop(agent: str, subject: str) -> None:
        conversation = _conversation(gov, workspace, agent, subject)
        count = 0
        while True:
            count += 1
            conversation.add("user", f"writer {n} message {count} for {subject}")
            os.write(progress, b".")

    threads = [
        threading.Thread(target=loop, args=(AGENTS[(n + t) % 2], SUBJECTS[t]), daemon=True)
        for t in range(2)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _fork(work: object) -> int:
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the child never returns
        try:
            work()  # type: ignore[operator]
        finally:
            os._exit(1)
    return pid


def _power_cut(workspace: Path, baseline: dict[Path, bytes], journal: Path) -> None:
    """Rebuild ``workspace`` from what was synced: everything else is lost."""
    synced: dict[Path, int] = {}
    for line in journal.read_text().splitlines():
        path, size = line.rsplit("\t", 1)
        synced[Path(path)] = max(synced.get(Path(path), 0), int(size))
    for path in [p for p in workspace.rglob("*") if p.is_file()]:
        before = baseline.get(path)
        if path in synced:  # an appended file: what was synced (at least the baseline)
            keep = max(synced[path], len(before or b""))
            with open(path, "r+b") as file:
                file.truncate(keep)
        elif before is not None:  # rewritten in place, never synced since (audit.head)
            path.write_bytes(before)
        else:
            path.unlink()
    for path, data in baseline.items():
        if not path.exists():
            path.write_bytes(data)


def _audited_and_stored(
    workspace: Path, policy: Policy, key: str, pairs: dict[tuple[str, str], tuple[str, str]]
) -> tuple[Counter[tuple[str, str]], Counter[tuple[str, str]]]:
    """Per (agent, subject): the ``persist ok`` audit entries, and the stored messages."""
    folder = audit_log_dir(policy, workspace)
    AuditLog(folder, AUDIT_KEY).repair()  # as the next writer does after a crash
    report = verify_log(folder, AuditKey.from_text(AUDIT_KEY))
    assert report.ok, report.findings
    by_hash = {hashes: pair for pair, hashes in pairs.items()}
    audited: Counter[tuple[str, str]] = Counter()
    for entry in AuditLog(folder, AUDIT_KEY).entries():
        if entry.event == "persist" and entry.attrs.get("outcome") == "ok":
            hashes = (entry.attrs["agent.hash"], entry.attrs["subject.hash"])
            audited[by_hash[hashes]] += 1
    gov = _governance(workspace, policy, key)
    stored: Counter[tuple[str, str]] = Counter()
    for agent, subject in pairs:
        store = gov.store_factory(memory_md_path(agent, workspace), lambda: "")
        text = store.subject_store(subject).read_memory() or ""  # type: ignore[attr-defined]
        stored[agent, subject] = len(parse_memory(text).records)
    return audited, stored


def _run(tmp_path: Path, sync: str) -> tuple[Counter[tuple[str, str]], Counter[tuple[str, str]]]:
    workspace = tmp_path / "ws"
    policy, key = _policy(sync), generate_master_key()
    gov = _governance(workspace, policy, key)
    pairs: dict[tuple[str, str], tuple[str, str]] = {}
    for subject in SUBJECTS:
        gov.grant(subject, "persist", actor="dpo@bank.example")
    for agent in AGENTS:  # keys, files and folders exist (and are synced) before the cut
        for subject in SUBJECTS:
            _conversation(gov, workspace, agent, subject).add("user", "opening")
            last = gov.audit.log.tail(1)[0]  # type: ignore[attr-defined]
            pairs[agent, subject] = (last.attrs["agent.hash"], last.attrs["subject.hash"])
    del gov
    os.sync()
    baseline = _snapshot(workspace)
    journal = tmp_path / "journal"
    journal_fd = os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    read_end, write_end = os.pipe()
    pids = [
        _fork(lambda n=n: _writer(workspace, policy, key, journal_fd, write_end, n))
        for n in range(PROCESSES)
    ]
    os.close(write_end)
    seen = 0
    while seen < ADDS_BEFORE_THE_CUT:
        ready, _, _ = select.select([read_end], [], [], 60)
        chunk = os.read(read_end, 4096) if ready else b""
        if not chunk:
            break
        seen += len(chunk)
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    for pid in pids:
        _, status = os.waitpid(pid, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGKILL, "a writer failed"
    os.close(read_end)
    os.close(journal_fd)
    assert seen >= ADDS_BEFORE_THE_CUT
    _power_cut(workspace, baseline, journal)
    return _audited_and_stored(workspace, policy, key, pairs)


def test_commit_loses_no_audited_message_in_a_power_cut(tmp_path: Path) -> None:
    audited, stored = _run(tmp_path, "commit")
    lost = {pair: audited[pair] - stored[pair] for pair in audited if audited[pair] > stored[pair]}
    assert not lost, f"audited but lost after the power cut: {lost}"
    assert sum(audited.values()) >= ADDS_BEFORE_THE_CUT  # the writers' adds were audited


def test_os_sync_can_lose_audited_messages_in_a_power_cut(tmp_path: Path) -> None:
    """The control: without "commit" the same cut loses messages the audit records."""
    audited, stored = _run(tmp_path, "os")
    assert sum(stored.values()) == len(stored)  # only the openings, synced before the writers
    assert sum(audited.values()) > sum(stored.values())
