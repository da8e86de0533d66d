"""The audit sink a Governance hands out: ``policy.load`` recorded before the first change.

Building a :class:`~governed_memory.Governance` writes nothing, so the entry
that names the policy a workspace runs under cannot be written at
construction. It is written when that policy is first used to govern
something: immediately before the first other entry that Governance's sink
receives (a persisted message, a consent change, an export, an erasure, a
purge, a key created, a ``memory.show``, ...), once per Governance. A
command that changes nothing and prints no memory content (``audit tail``,
``consent status``, ``purge --dry-run``) records nothing, so it leaves the
audit log as it found it. ``show`` is not one of them: it prints personal
data, so it records ``memory.show`` (counts only), and ``policy.load``
before it.

Every layer that audits through a Governance (its gate, retention, subject
requests, the keyring as its observer) reaches the sink as
``governance.audit``, so this one wrapper sees every entry.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from .._protocols import AuditSink

__all__ = ["POLICY_LOAD", "PolicyLoadSink"]

POLICY_LOAD = "policy.load"


class PolicyLoadSink:
    """``sink``, with one ``policy.load`` entry recorded before the first other entry.

    Transparent otherwise: attributes are the wrapped sink's (an
    ``AuditTrail``'s ``log``, ``agent_hash``, a ``RecordingAuditSink``'s
    ``records``), and ``isinstance(governance.audit, AuditTrail)`` holds for
    the trail it wraps, as a proxy of ``wrapt`` or ``unittest.mock`` does.
    A ``policy.load`` recorded explicitly passes through and does not count.

    Args:
        sink: where the entries go.
        attributes: the ``policy.load`` attributes (``policy_id``,
            ``policy_version``, ``source``).
    """

    __slots__ = ("_attributes", "_lock", "_pending", "_sink")

    def __init__(self, sink: AuditSink, attributes: dict[str, Any]) -> None:
        self._sink = sink
        self._attributes = dict(attributes)
        self._pending = True
        self._lock = threading.Lock()

    @property
    def sink(self) -> AuditSink:
        """The wrapped sink."""
        return self._sink

    @property
    def policy_loaded(self) -> bool:
        """Whether ``policy.load`` has been recorded through this sink."""
        return not self._pending

    def record(
        self,
        operation: str,
        *,
        agent: str | None,
        subject_id: str | None,
        outcome: str,
        **attrs: Any,
    ) -> None:
        """Record ``policy.load`` first if this is the first other entry, then the entry.

        Raises:
            Exception: what the wrapped sink raised. When ``policy.load`` cannot
                be recorded (an ``AuditWriteError``), the entry is still offered
                to the sink (a trail then marks its span as failed) and the error
                is raised, so the operation fails as an unrecorded one does;
                ``policy.load`` is tried again before the next entry.
        """
        failure: Exception | None = None
        if self._pending and operation != POLICY_LOAD:
            try:
                self._record_policy_load()
            except Exception as exc:
                failure = exc
        self._sink.record(operation, agent=agent, subject_id=subject_id, outcome=outcome, **attrs)
        if failure is not None:
            raise failure

    def record_with(
        self,
        operation: str,
        write: Callable[..., Any],
        *,
        agent: str | None,
        subject_id: str | None,
        outcome: str,
        **attrs: Any,
    ) -> bool:
        """The wrapped sink's ``record_with`` (an operation writing its own entry), once
        ``policy.load`` is recorded; False before (then :meth:`record` records it first)."""
        joined = getattr(self._sink, "record_with", None)
        if self._pending or joined is None:
            return False
        done: bool = joined(
            operation, write, agent=agent, subject_id=subject_id, outcome=outcome, **attrs
        )
        return done

    def _record_policy_load(self) -> None:
        with self._lock:  # two threads' first entries: one policy.load, before both
            if not self._pending:
                return
            # Marked done only once written: a failed write (AuditWriteError) fails
            # this operation, and the next one tries again.
            self._sink.record(
                POLICY_LOAD, agent=None, subject_id=None, outcome="ok", **self._attributes
            )
            self._pending = False

    def __getattr__(self, name: str) -> Any:
        # Only called for names not found on the wrapper: the wrapped sink's own.
        if name in PolicyLoadSink.__slots__:
            raise AttributeError(name)  # not set yet (no recursion through _sink)
        return getattr(self._sink, name)

    @property  # type: ignore[misc]
    def __class__(self) -> type:
        # isinstance() consults __class__ when the type does not match, so
        # isinstance(governance.audit, AuditTrail) stays true; type() is the wrapper's.
        return type(self._sink)

    def __repr__(self) -> str:
        return f"PolicyLoadSink({self._sink!r}, pending={self._pending})"
