"""Every event the library records is in the catalogue (AuditEvent) and documented in docs/audit.md.

The catalogue is what auditors and docs/audit.md go by: an event recorded
under a name it lacks (``keys.authenticate`` was) is one a reviewer cannot
look up.
"""

from __future__ import annotations

import re
from pathlib import Path

import governed_memory
from governed_memory._audit import AuditEvent

PACKAGE = Path(governed_memory.__file__).parent
DOCS = PACKAGE.parent / "docs" / "audit.md"
_LITERAL = re.compile(r"\.(?:record|record_entry)\(\s*\"([a-z][a-z._-]*)\"")
# Built from a variable, so no literal to find: _keys/_migration.py's f"{direction}-workspace".
_COMPUTED = {"encrypt-workspace", "decrypt-workspace"}


def _recorded() -> set[str]:
    names = set(_COMPUTED)
    for path in PACKAGE.rglob("*.py"):
        names.update(_LITERAL.findall(path.read_text(encoding="utf-8")))
    return names


def test_the_scan_finds_the_events_recorded_by_name() -> None:
    assert {"erase", "export", "memory.show", "keys.authenticate", "keys.rotate"} <= _recorded()


def test_every_recorded_event_is_in_the_catalogue() -> None:
    assert _recorded() - {e.value for e in AuditEvent} == set()


def test_the_keyring_tagging_event_is_catalogued() -> None:
    assert AuditEvent("keys.authenticate") is AuditEvent.KEYS_AUTHENTICATE


def test_every_catalogued_event_is_documented() -> None:
    text = DOCS.read_text(encoding="utf-8")
    assert [e.value for e in AuditEvent if f"`{e.value}`" not in text] == []
