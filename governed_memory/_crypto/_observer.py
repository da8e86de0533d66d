"""Where the encryption layer reports what it did (the audit layer listens here).

``CryptoObserver`` is the :class:`~governed_memory._protocols.AuditSink`
protocol under the name this layer has always used, so an audit sink is
passed as is. Operations and their attributes (never key material or
message content):

==================  =========  ==========================================
operation           outcome    attributes
==================  =========  ==========================================
``keys.create``     ok         kind, ref, generation
``keys.shred``      ok         kind, ref, generations
``keys.rotate``     ok/error   from_key_ids, to_key_id, rewrapped, ...
``keys.reencrypt``  ok/error   files, frames, dropped
``keys.authenticate`` ok       entries (tagged by the migration of an untagged keyring)
``decrypt``         error      file, error (the exception type)
``recover``         ok         file, dropped_bytes (a torn final frame)
``encrypt-workspace`` / ``decrypt-workspace``  ok/error  files
==================  =========  ==========================================
"""

from __future__ import annotations

from .._protocols import AuditSink, NullAuditSink

CryptoObserver = AuditSink
NullObserver = NullAuditSink

__all__ = ["CryptoObserver", "NullObserver"]
