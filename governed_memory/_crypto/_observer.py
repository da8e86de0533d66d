"""Where the encryption layer reports what it did (the audit layer listens here)."""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["CryptoObserver", "NullObserver"]


class CryptoObserver(Protocol):
    """Told about each security-relevant event, after it happened.

    The same shape as the governance :class:`AuditSink`, so an audit sink can
    be passed as is. Operations and their attributes (never key material or
    message content):

    ==================  =========  ==========================================
    operation           outcome    attributes
    ==================  =========  ==========================================
    ``keys.create``     ok         kind, ref, generation
    ``keys.shred``      ok         kind, ref, generations
    ``keys.rotate``     ok/error   from_key_ids, to_key_id, rewrapped, ...
    ``keys.reencrypt``  ok/error   files, frames, dropped
    ``decrypt``         error      file, error (the exception type)
    ``recover``         ok         file, dropped_bytes (a torn final frame)
    ``encrypt-workspace`` / ``decrypt-workspace``  ok/error  files
    ==================  =========  ==========================================
    """

    def record(
        self,
        operation: str,
        *,
        agent: str | None,
        subject_id: str | None,
        outcome: str,
        **attrs: Any,
    ) -> None:
        """Record one finished operation; must not raise for failures of its own."""
        ...


class NullObserver:
    """Records nothing."""

    def record(
        self,
        operation: str,
        *,
        agent: str | None,
        subject_id: str | None,
        outcome: str,
        **attrs: Any,
    ) -> None:
        return None
