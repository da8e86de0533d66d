"""The extension points a user plugs in: a clock, a key provider, an audit sink, a summarizer.

Each is a :class:`typing.Protocol`, documented here once; the shipped
implementations satisfy them structurally and live beside the code that uses
them (``SystemClock``/``FixedClock`` in ``_base``, ``LocalKeyProvider``/
``InMemoryKeyProvider``/``KeyChain`` in ``_crypto``, ``AuditTrail`` in
``_audit``, ``LiteLLMSummarizer``/``ExtractiveSummarizer`` in ``_memory``).
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

__all__ = ["AuditSink", "Clock", "KeyProvider", "NullAuditSink", "Summarizer", "Transcript"]


class Clock(Protocol):
    """A source of the current time. Implement ``now`` to inject your own."""

    def now(self) -> _dt.datetime:
        """Return the current naive local time."""
        ...


@runtime_checkable
class KeyProvider(Protocol):
    """Wraps data keys under a master key that never leaves the provider.

    The keyring calls :meth:`wrap` when it creates or re-wraps a data key and
    :meth:`unwrap` when it needs one, passing ``context`` (bytes naming the
    workspace and the data key) that must be bound to the wrapped bytes: an
    unwrap with another context must fail. AWS KMS maps ``context`` to an
    encryption context, Vault transit to ``associated_data``/``context``.

    Implementations raise :class:`KeyUnavailableError` from :meth:`unwrap`
    when they do not hold ``key_id`` (so a :class:`KeyChain` can try the next
    provider) and :class:`DecryptionError` when the wrapped bytes do not
    authenticate.
    """

    @property
    def key_id(self) -> str:
        """The id of the master key new wraps use (never the key itself)."""
        ...

    def wrap(self, data_key: bytes, context: bytes) -> bytes:
        """Encrypt ``data_key`` under the master key :attr:`key_id`."""
        ...

    def unwrap(self, key_id: str, wrapped: bytes, context: bytes) -> bytes:
        """Decrypt ``wrapped``, which :meth:`wrap` made under master key ``key_id``."""
        ...


class AuditSink(Protocol):
    """Receives one call per governed or security-relevant operation, after it finished.

    Governance, retention, subject requests and the encryption layer (as its
    ``CryptoObserver``) all report here; the audit layer's ``AuditTrail``
    implements it. ``operation`` is the event (``persist``, ``preload``,
    ``compact``, ``archive``, ``summarize``, ``consent.grant``,
    ``consent.withdraw``, ``policy.load``, ``purge``, ``erase``, ``keys.*``,
    ``decrypt``, ...; docs/audit.md lists them with their attributes).
    ``outcome`` is ``ok`` (done), ``memory_only`` (kept off disk),
    ``denied`` (ConsentRequiredError raised), ``error`` (the operation raised;
    ``error`` attribute holds the exception type), or for ``summarize``
    ``allowed`` / ``use_local`` / ``skip``. ``attrs`` carry at least
    ``policy_id`` and ``policy_version`` for governed operations; never
    message content or key material. Implementations must not raise for
    ordinary failures of their own (log instead): auditing must not break the
    memory path unless the policy says so.
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
        """Record one finished operation."""
        ...


class NullAuditSink:
    """The default sink: records nothing (default mode writes no audit files)."""

    def record(self, operation: str, **entry: Any) -> None:
        return None


@dataclass(frozen=True)
class Transcript:
    """A conversation to summarize, in both of the forms summarizers want.

    Attributes:
        text: the history as ``return_history_as_string()`` renders it,
            static context included (what the reference sends to the model).
        messages: the turns to summarize: the history without the static
            context (system prompt, rules) that compaction re-seeds anyway.
        user_role: the role tasks are recorded under (``Human`` for an
            Agent), when known.
    """

    text: str
    messages: Sequence[Mapping[str, Any]] = field(default=())
    user_role: str | None = None


@runtime_checkable
class Summarizer(Protocol):
    """Turns a transcript into a summary that replaces it.

    Attributes:
        model: the model name the summary comes from (``local/extractive``
            for the built-in offline summarizer).
        remote: True when :meth:`summarize` sends the transcript out of the
            process (a policy can refuse such summarizers).
    """

    model: str
    remote: bool

    def summarize(
        self, transcript: Transcript, *, max_tokens: int, temperature: float | None
    ) -> str:
        """Return the summary body (no prefix); it should fit in ``max_tokens``.

        May raise; the compressor then keeps the history as it is. An empty
        return value is refused by ``Conversation.compact``.
        """
        ...
