"""The readable rendering of an export (``export.md``), for the person it is about."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["render_markdown"]


def _fence(text: str) -> str:
    # A fence longer than any backtick run inside, so content cannot close it.
    longest = max((len(m) for m in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{text}\n{fence}"


def _scope_line(scope: dict[str, Any]) -> str:
    if scope.get("subject") is not None and scope.get("agent") is not None:
        return f"data subject `{scope['subject']}` in agent `{scope['agent']}`"
    if scope.get("subject") is not None:
        return f"data subject `{scope['subject']}`"
    return f"agent `{scope['agent']}` (all data subjects)"


def render_markdown(document: dict[str, Any]) -> str:
    """``export.md`` for an export document (see docs/export-schema.json)."""
    counts = document["counts"]
    out = [
        "# Personal data export",
        "",
        f"- Scope: {_scope_line(document['scope'])}",
        f"- Generated: {document['generated_at']} by {document['generator']}",
        f"- Policy: {document['policy']['id']} version {document['policy']['version']}",
        f"- Records: {counts['records']}; summaries: {counts['summaries']} "
        f"({counts['withheld_summaries']} withheld); agents: {counts['agents']}",
        "",
        "The machine-readable copy is `export.json`; `report.md` answers GDPR Art. 15(1) item "
        "by item; `manifest.json` lists the SHA-256 of each file.",
        "",
        "## Messages",
        "",
    ]
    if not document["records"]:
        out += ["No messages were found.", ""]
    current = None
    for record in document["records"]:
        where = (record["agent"], record["source_file"])
        if where != current:
            current = where
            out += [f"### Agent `{record['agent']}`, file `{record['source_file']}`", ""]
        out += [f"**{record['role']}**, {record['timestamp']}", "", _fence(record["content"]), ""]
    out += ["## Summaries built from these messages", ""]
    if not document["summaries"]:
        out += ["None.", ""]
    for summary in document["summaries"]:
        out += [
            f"**{summary['role']}**, {summary['timestamp']}, agent `{summary['agent']}`, "
            f"file `{summary['source_file']}`",
            "",
        ]
        if summary["content"] is None:
            out += [f"_Content withheld: {summary['withheld_reason']}._", ""]
        else:
            out += [_fence(summary["content"]), ""]
    out += _events("Consent history", document.get("consent"), ("at", "purpose", "action", "actor"))
    out += _events("Legal holds", document.get("holds"), ("placed_at", "reason", "released_at"))
    out += _events("Erasures", document.get("erasures"), ("requested_at", "state", "completed_at"))
    out += _events("Audit entries", _audit_rows(document.get("audit")), AUDIT_COLUMNS)
    return "\n".join(out).rstrip("\n") + "\n"


AUDIT_COLUMNS = ("seq", "time (UTC)", "event", "outcome")


def _audit_rows(entries: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
    """The audit table's cells from entries as recorded (``AuditEntry.to_dict``)."""
    if entries is None:
        return None
    rows = []
    for entry in entries:
        attrs = entry.get("attrs")
        outcome = attrs.get("outcome") if isinstance(attrs, dict) else None
        rows.append(
            {
                "seq": entry.get("seq"),
                "time (UTC)": entry.get("ts"),
                "event": entry.get("event"),
                "outcome": outcome,
            }
        )
    return rows


def _events(title: str, rows: list[dict[str, Any]] | None, keys: tuple[str, ...]) -> list[str]:
    lines = [f"## {title}", ""]
    if rows is None:
        return [*lines, "Not kept in this workspace.", ""]
    if not rows:
        return [*lines, "None.", ""]
    lines += ["| " + " | ".join(keys) + " |", "|" + "---|" * len(keys)]
    for row in rows:
        cells = [
            str(row.get(k) if row.get(k) is not None else "").replace("|", "\\|") for k in keys
        ]
        lines.append("| " + " | ".join(c.replace("\n", " ") for c in cells) + " |")
    return [*lines, ""]
