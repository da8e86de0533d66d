"""``report.md``: the GDPR Art. 15(1) report a privacy officer hands to the person.

The items (a) to (h) in the article's order, in plain language, from the
export document alone (docs/export-schema.json), so the report says nothing
``export.json`` does not hold. The data itself is summarised (counts per
agent and kind, time span); ``export.md`` and ``export.json`` carry it in full.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

__all__ = ["render_report"]

_STATUS = {
    "scheduled": "deleted after {delete_after}",
    "forever": "kept without a time limit",
    "held": "kept: legal hold {held}",
    "in_force": "kept while in force",
    "by_count": "kept while among the newest archives",
    "not_managed": "not deleted automatically",
}


def _cell(value: object) -> str:
    return str(value if value is not None else "").replace("|", "\\|").replace("\n", " ")


def _table(header: list[str], rows: list[list[object]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return [*lines, ""]


def _whom(document: dict[str, Any]) -> str:
    scope = document["scope"]
    if scope["subject"] is not None:
        where = f" in agent `{scope['agent']}`" if scope["agent"] is not None else ""
        return f"the data subject `{scope['subject']}`{where}"
    return f"every data subject of agent `{scope['agent']}`"


def render_report(document: dict[str, Any]) -> str:
    """``report.md`` for an export document."""
    out = [
        "# Your personal data: access report (GDPR Art. 15)",
        "",
        f"This report answers an access request about {_whom(document)}. It was made on "
        f"{document['generated_at']} under policy `{document['policy']['id']}` version "
        f"{document['policy']['version']} (export `{document['id']}`).",
        "",
        "With it you receive a copy of the data itself (Art. 15(3)): `export.md` to read, "
        "`export.json` for a computer; `manifest.json` lists the SHA-256 of each file, so you "
        "can check nothing was changed.",
        "",
    ]
    out += _data_summary(document)
    out += _purposes(document)
    out += _categories(document)
    out += _recipients(document)
    out += _retention(document)
    out += _rights()
    out += _source(document)
    out += _automated()
    return "\n".join(out).rstrip("\n") + "\n"


def _data_summary(document: dict[str, Any]) -> list[str]:
    counts = document["counts"]
    lines = [
        "## The data we hold",
        "",
        f"- {counts['records']} message(s) and {counts['summaries']} summary(ies) "
        f"({counts['withheld_summaries']} withheld) in {counts['agents']} agent(s).",
    ]
    times = sorted(r["timestamp"] for r in document["records"])
    if times:
        lines.append(f"- The oldest message is from {times[0]}, the newest from {times[-1]}.")
    if document["counts"]["withheld_summaries"]:
        lines.append(
            "- A withheld summary was also built from other people's messages; its content is "
            "not shown to protect their rights (Art. 15(4)), but its existence is."
        )
    per_agent = Counter((r["agent"], r["source_kind"]) for r in document["records"])
    if per_agent:
        lines += [""]
        lines += _table(
            ["agent", "where", "messages"],
            [[a, k, n] for (a, k), n in sorted(per_agent.items())],
        )
    else:
        lines += [""]
    return lines


def _purposes(document: dict[str, Any]) -> list[str]:
    lines = ["## (a) Why we process it: the purposes", ""]
    for p in document["purposes"]:
        basis = "needs your consent" if p["consent_required"] else "does not rely on your consent"
        state = ""
        if p["consent"] is not None:
            since = f" since {p['since']}" if p["since"] else ""
            state = f" Your consent: **{p['consent']}**{since}."
        lines.append(f"- **{p['purpose']}**: {p['description']}. This purpose {basis}.{state}")
    lines.append("")
    consent = document["consent"]
    if consent:
        lines += ["Your consent history, oldest first:", ""]
        lines += _table(
            ["when", "purpose", "change", "recorded by"],
            [[c["at"], c["purpose"], c["action"], c["actor"]] for c in consent],
        )
    elif consent is not None:
        lines += ["No consent was ever recorded for you.", ""]
    return lines


def _categories(document: dict[str, Any]) -> list[str]:
    roles = sorted({r["role"] for r in document["records"]})
    lines = [
        "## (b) What kinds of data",
        "",
        "- The text of conversation messages"
        + (f" (written as: {', '.join(roles)})" if roles else "")
        + ", with the time each was written.",
    ]
    if document["summaries"]:
        lines.append("- Summaries of conversations made when the memory grew too long.")
    if document["consent"]:
        lines.append("- Records of your consent: what you agreed to or withdrew, and when.")
    if document["audit"]:
        lines.append(
            "- Audit records of what was done with your data (no message content; you are "
            "named only by a keyed hash)."
        )
    return [*lines, ""]


def _recipients(document: dict[str, Any]) -> list[str]:
    rec = document["recipients"]
    lines = ["## (c) Who received it", ""]
    if not rec["from_audit_trail"]:
        return [*lines, f"Not recorded: {rec['note']}.", ""]
    if rec["external"]:
        lines += [
            "These external models were sent the text of your conversations to summarize it:",
            "",
        ]
        lines += _table(
            ["model", "provider", "times", "first", "last", "agents"],
            [
                [
                    r["model"],
                    r["provider"] or "",
                    r["times"],
                    r["first_at"],
                    r["last_at"],
                    ", ".join(r["agents"]),
                ]
                for r in rec["external"]
            ],
        )
    else:
        lines += ["No external model was sent your data.", ""]
    if rec["local"]:
        lines += [
            "Summaries made locally, inside our own system (not a recipient: nothing was sent):",
            "",
        ]
        lines += _table(
            ["local summarizer", "instead of", "times"],
            [[r["model"], r["instead_of"] or "", r["times"]] for r in rec["local"]],
        )
    return lines


def _retention(document: dict[str, Any]) -> list[str]:
    ret = document["retention"]
    lines = [
        "## (d) How long we keep it",
        "",
        f"Dates are computed at {ret['as_of']} under the current policy; "
        + (
            f"deletions run on schedule: {ret['purge_schedule']}."
            if ret["purge_schedule"]
            else "no purge is scheduled: deletions run when an operator starts them."
        ),
        "",
    ]
    rows = []
    for a in ret["artefacts"]:
        status = _STATUS[a["status"]].format(
            delete_after=a["delete_after"], held=", ".join(a["held_by"])
        )
        rows.append([a["artefact"], a["rule"] or "", a["limit"] or "", status])
    lines += _table(["what", "rule", "limit", "when it is deleted"], rows)
    lines += ["The rules (the criteria that set these periods):", ""]
    lines += _table(
        ["rule", "applies to", "limit"],
        [[r["rule"], r["applies_to"], r["limit"]] for r in ret["rules"]],
    )
    return lines


def _rights() -> list[str]:
    return [
        "## (e) Your rights",
        "",
        "You can ask us to correct data that is wrong (rectification, Art. 16), to erase it "
        "(Art. 17), to restrict its processing (Art. 18), and you can object to its processing "
        "(Art. 21). Where the processing relies on your consent you can withdraw it at any time; "
        "this does not affect what was done before (Art. 7(3)).",
        "",
        "## (f) Complaints",
        "",
        "You have the right to lodge a complaint with a supervisory authority, in particular "
        "in the EU member state where you live, work, or where you think the infringement "
        "took place (Art. 77).",
        "",
    ]


def _source(document: dict[str, Any]) -> list[str]:
    written = Counter(
        (r["agent"], r["memory"], r["written_by"])
        for r in document["records"] + document["summaries"]
    )
    lines = [
        "## (g) Where the data came from",
        "",
        "The messages were written during your conversations with the agents below (persist: "
        "kept as the conversation happened); summaries were written by a compaction of an "
        "agent's memory (compact) from those messages.",
        "",
    ]
    if written:
        lines += _table(
            ["agent", "memory", "written by", "items"],
            [
                [
                    agent,
                    "yours alone" if memory == "subject" else "the agent's shared memory",
                    op,
                    n,
                ]
                for (agent, memory, op), n in sorted(written.items())
            ],
        )
    else:
        lines += ["No message is held.", ""]
    return lines


def _automated() -> list[str]:
    return [
        "## (h) Automated decisions",
        "",
        "The memory system that holds this data makes no decision about you and does no "
        "profiling: it stores, summarizes and deletes conversation text. If the service that "
        "uses it makes automated decisions (Art. 22), the privacy officer adds that "
        "information to this report.",
        "",
    ]
