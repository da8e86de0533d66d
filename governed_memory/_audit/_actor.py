"""Naming the operator: an audit sink that adds who acted to every entry.

The command line runs operations of the library (a key rotation, an export,
a workspace migration) that record themselves through the governance's
audit sink without knowing who started them. :class:`ActorSink` wraps that
sink for one command and adds ``actor`` (recorded as ``actor.hash``, a keyed
hash, like the actor of a consent change) to every entry that does not name
one already, so the operation's own entries say who ran it. An entry that
names its own actor (a consent change on behalf of a data subject) keeps it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._protocols import AuditSink

__all__ = ["ActorSink"]


class ActorSink:
    """An :class:`~governed_memory.AuditSink` that records ``actor`` beside every entry.

    Args:
        inner: the sink the entries go to (a Governance's ``audit``).
        actor: who acted (``--actor``, else ``GOVERNED_MEMORY_ACTOR``, else
            ``cli:<login>``: the CLI's one rule, ``CliContext.actor``).
    """

    def __init__(self, inner: AuditSink, actor: str) -> None:
        self._inner = inner
        self.actor = actor

    def record(
        self,
        operation: str,
        *,
        agent: str | None,
        subject_id: str | None,
        outcome: str,
        **attrs: Any,
    ) -> None:
        """Record through the wrapped sink, with ``actor`` unless the caller names one."""
        if attrs.get("actor") is None:
            attrs["actor"] = self.actor
        self._inner.record(operation, agent=agent, subject_id=subject_id, outcome=outcome, **attrs)

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
        """The wrapped sink's ``record_with``, with ``actor`` as :meth:`record` adds it
        (False when the sink has none: then the caller uses :meth:`record`)."""
        joined = getattr(self._inner, "record_with", None)
        if joined is None:
            return False
        if attrs.get("actor") is None:
            attrs["actor"] = self.actor
        done: bool = joined(
            operation, write, agent=agent, subject_id=subject_id, outcome=outcome, **attrs
        )
        return done

    def __getattr__(self, name: str) -> Any:
        # The rest of the sink's interface (entries_for, subject_hash, ...) as it is.
        return getattr(self._inner, name)

    def __repr__(self) -> str:
        return f"ActorSink({self._inner!r})"
