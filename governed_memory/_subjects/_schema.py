"""The models of an export document (``export.json``): the export is built through them.

The export validates the document it assembled against :class:`ExportDocument`
and writes the models' dump, so a field the models do not declare cannot
reach ``export.json``; docs/export-schema.json is generated from these
models, never edited by hand::

    python -m governed_memory._subjects._write_schema > docs/export-schema.json

(a test asserts the committed file equals the generated one). The generator
lives in the package, beside the models, so the command runs wherever the
package is installed: whoever receives exports of an installed version can
print the schema they follow. (``_write_schema`` is a module of its own
because the package imports this one: run as ``__main__``, it would load twice.)

Format version 2 keeps every field of version 1 and adds what GDPR
Art. 15(1) asks beside the data: ``purposes`` (a), ``recipients`` (c),
``retention`` (d) and, on every record and summary, its source (g):
``memory`` and ``written_by``; plus ``id``, the export receipt's id.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from .._records import Hold  # a hold as stored is its own schema: one definition of its fields

__all__ = [
    "EXPORT_FORMAT",
    "EXPORT_VERSION",
    "ArtefactRetention",
    "ExportDocument",
    "export_schema",
]

EXPORT_FORMAT = "governed-memory-export"
EXPORT_VERSION = 2
SCHEMA_ID = f"https://governed-memory.invalid/schemas/export-{EXPORT_VERSION}.json"


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class Scope(_Model):
    """What the export covers: a subject, an agent, or a subject in one agent."""

    subject: str | None = Field(description="The data subject; null for a whole-agent export.")
    agent: str | None = Field(description="The one agent exported; null for every agent.")


class PolicyRef(_Model):
    id: str
    version: str


class Source(_Model):
    """Where a record was found and how it got there (Art. 15(1)(g))."""

    agent: str = Field(description="The agent whose memory held it.")
    source_file: str = Field(
        description="The file it was read from, relative to the workspace: agents/<agent>/"
        "MEMORY.md or archive/history_<time>.md, or for a subject memory (isolation = "
        '"subject") agents/<agent>/subjects/<p>/MEMORY.md or .../archive/history_<time>.md '
        "(<p>: a hash of the subject id; .gmenc when encrypted)."
    )
    source_kind: Literal["memory", "archive"] = Field(
        description="memory: the active memory; archive: a copy a compaction set aside."
    )
    memory: Literal["agent", "subject"] = Field(
        description="agent: the agent's shared memory; subject: the subject's own memory "
        '(isolation = "subject").'
    )
    written_by: Literal["persist", "compact"] = Field(
        description="persist: a message the conversation wrote as it happened; compact: a "
        "summary written by a compaction of the memory."
    )
    role: str = Field(description="Who wrote the message (e.g. Human, the agent's name, System).")
    timestamp: str = Field(description="When it was written, as stored (naive local ISO 8601).")
    subject: str | None = Field(
        description="The record's subject; in a subject export, null for a summary attributed "
        "to another subject (never named)."
    )


class Record(Source):
    content: str
    record_id: str | None = Field(
        pattern=r"^rec-[0-9a-f]{16}$",
        description="The record's id, as `governed-memory rectify --record` takes it "
        "(docs/rectification.md); null for a record that names no subject (agent exports).",
    )


class Summary(Source):
    content: str | None = Field(
        description="null when withheld because other subjects' data went into it."
    )
    withheld_reason: str | None
    other_subjects: int = Field(
        ge=0, description="How many other subjects it was also built from (never their names)."
    )
    lineage: list[str] | None = Field(
        description="Subjects it was built from; only in agent exports."
    )

    @model_validator(mode="after")
    def _withheld_has_reason(self) -> Summary:
        if (self.content is None) != (self.withheld_reason is not None):
            raise ValueError("a summary has either its content or the reason it is withheld")
        return self


class ConsentEvent(_Model):
    purpose: str
    action: Literal["grant", "withdraw"]
    at: str
    actor: str
    policy_id: str
    policy_version: str


class Erasure(_Model):
    id: str
    scope: Scope
    state: Literal["pending", "complete"]
    requested_at: str
    completed_at: str | None
    records: int | None = Field(default=None, ge=0, description="Records erased (complete only).")
    summaries: int | None = Field(default=None, ge=0, description="Summaries erased.")


class Counts(_Model):
    records: int = Field(ge=0)
    summaries: int = Field(ge=0)
    withheld_summaries: int = Field(ge=0)
    agents: int = Field(ge=0)


class Purpose(_Model):
    """One purpose the policy processes data for (Art. 15(1)(a)), with the subject's consent."""

    purpose: str
    description: str = Field(description="What the purpose means, in plain language.")
    consent_required: bool = Field(
        description="Whether the policy requires the subject's consent for it "
        "(consent.required_for)."
    )
    consent: Literal["granted", "withdrawn", "not recorded"] | None = Field(
        description="The subject's current consent (null in an agent export)."
    )
    since: str | None = Field(description="When the current consent state was recorded.")


class Recipient(_Model):
    """An external summarizer model that was sent the subject's messages (Art. 15(1)(c))."""

    model: str = Field(description="The model name as configured (e.g. openai/gpt-4o-mini).")
    provider: str | None = Field(
        description="The provider prefix of the model name (e.g. openai), when it has one."
    )
    times: int = Field(ge=1, description="How many summaries it was asked for.")
    first_at: str
    last_at: str
    agents: list[str] = Field(description="The agents whose compaction sent it (by name).")


class LocalProcessing(_Model):
    """A summary made in the process, by a local summarizer: nothing was disclosed."""

    model: str = Field(description="The local summarizer (local/...).")
    instead_of: str | None = Field(
        description="The external model the policy refused, replaced by the local one."
    )
    times: int = Field(ge=1)
    first_at: str
    last_at: str


class Recipients(_Model):
    """Who received the subject's data, as the audit trail records it."""

    from_audit_trail: bool = Field(
        description="false: the workspace keeps no audit log (or no audit key), so recipients "
        "cannot be listed from records; see note."
    )
    external: list[Recipient]
    local: list[LocalProcessing]
    note: str


class RetentionRule(_Model):
    """One rule of the policy's [retention] section: the criteria (Art. 15(1)(d))."""

    rule: str = Field(description="The policy key, e.g. archives_max_age.")
    applies_to: str
    limit: str = Field(description="A duration such as 30d, a count, or forever.")


class ArtefactRetention(_Model):
    """When the current policy deletes one artefact the export cites (Art. 15(1)(d))."""

    artefact: str = Field(
        description="The file (as in source_file), a consent record, an erasure record or the "
        "audit log entries."
    )
    kind: Literal["memory", "archive", "export", "audit", "consent", "tombstone"]
    agent: str | None
    rule: str | None = Field(description="The policy key that governs it (null: not managed).")
    limit: str | None = Field(description="The rule's value (30d, forever, 10 archives).")
    age_from: str | None = Field(description="The time its age is counted from (ISO 8601).")
    status: Literal["scheduled", "forever", "held", "in_force", "by_count", "not_managed"] = Field(
        description="scheduled: the first purge after delete_after deletes it; forever: the "
        "rule keeps it without limit; held: a legal hold keeps it (held_by); in_force: kept "
        "while it is in force (a current consent, a pending erasure, the audit segment being "
        "written); by_count: kept while among the newest archives; not_managed: no "
        "retention rule reaches it."
    )
    delete_after: str | None = Field(description="ISO 8601; only when status is scheduled.")
    held_by: list[str] = Field(description="The ids of the legal holds that keep it.")
    note: str = Field(description="The same, in plain language.")


class Retention(_Model):
    as_of: str = Field(description="The time the dates were computed at.")
    purge_schedule: str | None = Field(
        description="When purges run (schedule.purge_cron or purge_interval, with its time "
        "zone); null when none is scheduled."
    )
    rules: list[RetentionRule]
    artefacts: list[ArtefactRetention]


class ExportDocument(_Model):
    """export.json: everything a workspace holds about a subject (or an agent), and about its use."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        title=f"governed-memory subject access export, version {EXPORT_VERSION}",
        json_schema_extra={
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "$id": SCHEMA_ID,
            "description": "export.json written by `governed-memory export` and "
            "governed_memory.export_subject / export_agent. Generated from "
            "governed_memory/_subjects/_schema.py; see docs/access-reports.md.",
        },
    )

    format: Literal["governed-memory-export"]
    version: Literal[2] = Field(
        description="Bumped on any incompatible change; readers must check it."
    )
    id: str = Field(description="The export's id, also the id of its receipt.")
    generated_at: str = Field(description="When the export was made (ISO 8601 with offset).")
    generator: str = Field(description="governed-memory and its version.")
    scope: Scope
    policy: PolicyRef
    encrypted_workspace: bool = Field(
        description="Whether the files were encrypted at rest (the export itself is plaintext)."
    )
    records: list[Record] = Field(
        description="Every message of the subject, from active memory and every archive, "
        "oldest file first."
    )
    summaries: list[Summary] = Field(
        description="Compaction summaries built from (or attributed to) the subject's messages."
    )
    purposes: list[Purpose]
    consent: list[ConsentEvent] | None = Field(
        description="The subject's consent grants and withdrawals, oldest first; null in an "
        "agent export."
    )
    recipients: Recipients
    retention: Retention
    holds: list[Hold] | None = Field(
        description="Legal holds naming the subject (or, in an agent export, the agent), "
        "including released ones."
    )
    erasures: list[Erasure] = Field(
        description="Erasures of the subject (or agent) recorded in the workspace."
    )
    audit: list[dict[str, Any]] | None = Field(
        description="Audit log entries about the subject (or agent); null when the workspace "
        "keeps no audit log."
    )
    counts: Counts


def export_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of ``export.json``, generated from the models."""
    schema = ExportDocument.model_json_schema(mode="serialization")
    ordered = {key: schema.pop(key) for key in ("$schema", "$id", "title", "description")}
    return {**ordered, **schema}


def render_schema() -> str:
    """docs/export-schema.json's text."""
    return json.dumps(export_schema(), indent=2, ensure_ascii=False) + "\n"
