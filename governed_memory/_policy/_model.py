"""The policy: what is kept, for how long, under which consent, and who may read it.

A policy is a TOML file an admin reviews (see policies/ and docs/policies.md).
Loading validates every key: unknown keys, wrong types, out-of-range values
and contradictions are refused with an error naming the file, the key and the
fix. A policy's ``id`` and ``version`` travel with every decision made under it.

With no policy configured the built-in :data:`DEFAULT_POLICY` applies: the
reference's behaviour, byte for byte.
"""

from __future__ import annotations

import datetime as _dt
import fnmatch
import json
import tomllib
import zoneinfo
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, Self

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from .._base import Duration, OptionalDuration, format_duration
from .._errors import PolicyError
from .._protocols import LOCAL_PREFIX, LOCAL_SUMMARIZER  # defined with the gate; re-exported

if TYPE_CHECKING:
    from ._settings import Settings

__all__ = [
    "BUILTIN_PURPOSES",
    "DEFAULT_POLICY",
    "LOCAL_PREFIX",
    "LOCAL_SUMMARIZER",
    "AuditPolicy",
    "ConsentPolicy",
    "DurabilityPolicy",
    "EncryptionPolicy",
    "EvidencePolicy",
    "Isolation",
    "MemoryPolicy",
    "MissingConsent",
    "Policy",
    "PolicyError",
    "RectifySummaries",
    "RequestsPolicy",
    "ResolvedPolicy",
    "RetentionPolicy",
    "SchedulePolicy",
    "StoragePolicy",
    "SummarizationFallback",
    "SummarizationPolicy",
    "Sync",
    "WithdrawalAction",
    "WithoutConsent",
    "find_policy",
    "load_policy",
    "resolve_policy",
    "shipped_policies",
]

BUILTIN_PURPOSES = ("persist", "summarize")


class MissingConsent(StrEnum):
    """What happens to a write for a subject without the needed consent."""

    MEMORY_ONLY = "memory_only"
    DENY = "deny"


class WithdrawalAction(StrEnum):
    """What a consent withdrawal does to data already stored."""

    STOP = "stop"
    ERASE = "erase"


class SummarizationFallback(StrEnum):
    """What compression does when the configured summarizer may not be used."""

    LOCAL = "local"
    SKIP = "skip"


class RectifySummaries(StrEnum):
    """``summarization.on_rectify``: what a rectification does to the summaries built from a record."""

    MARK = "mark"  # marked as built from a corrected record (note, metadata, verbatim copies fixed)
    REGENERATE = (
        "regenerate"  # summarised again from their corrected source (the allowed summarizer)
    )


class WithoutConsent(StrEnum):
    """``summarization.without_consent``: a summary over turns of subjects without ``persist`` consent."""

    ON_MISSING = (
        "on_missing"  # consent.on_missing decides: the compaction stays in memory, or is refused
    )
    LEAVE_OUT = (
        "leave_out"  # their turns are left out of the summary and kept, unsummarised, in memory
    )


_Purpose = Annotated[str, Field(pattern=r"^[a-z][a-z0-9_-]{0,63}$")]
_ModelPattern = Annotated[str, Field(min_length=1, max_length=200)]


def _no_duplicates(name: str, values: tuple[str, ...]) -> None:
    dupes = sorted({v for v in values if values.count(v) > 1})
    if dupes:
        raise ValueError(f"{name} lists {dupes} more than once; list each once")


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, validate_default=True)


class PolicyMeta(_Section):
    """``[policy]``: identity of the policy."""

    id: str = Field(default="default", min_length=1, pattern=r"^[A-Za-z0-9_.-]+$")
    version: str = Field(default="1", min_length=1)
    description: str = ""


class ConsentPolicy(_Section):
    """``[consent]``: which purposes need consent and what happens without it."""

    required_for: tuple[_Purpose, ...] = ()
    purposes: tuple[_Purpose, ...] = BUILTIN_PURPOSES
    on_missing: MissingConsent = MissingConsent.MEMORY_ONLY
    on_withdraw: WithdrawalAction = WithdrawalAction.STOP
    erase_grace: Duration = _dt.timedelta(0)

    @model_validator(mode="after")
    def _purposes_known(self) -> Self:
        unknown = [p for p in self.required_for if p not in self.purposes]
        if unknown:
            raise ValueError(
                f"consent.required_for names {unknown}, which are not in consent.purposes "
                f"{list(self.purposes)}; add them to purposes or remove them"
            )
        missing = [p for p in BUILTIN_PURPOSES if p not in self.purposes]
        if missing:
            raise ValueError(
                f"consent.purposes must keep the built-in purposes {missing}; add them back"
            )
        _no_duplicates("consent.purposes", self.purposes)
        _no_duplicates("consent.required_for", self.required_for)
        if self.erase_grace > _dt.timedelta(0) and self.on_withdraw is WithdrawalAction.STOP:
            raise ValueError(
                f"consent.erase_grace = {format_duration(self.erase_grace)} has no effect while "
                "consent.on_withdraw = 'stop' (nothing is erased); set on_withdraw = 'erase' "
                "or remove erase_grace"
            )
        return self


class Isolation(StrEnum):
    """``memory.isolation``: which records a conversation sees and compacts."""

    AGENT = "agent"  # the reference: one memory per agent, every conversation sees all of it
    SUBJECT = "subject"  # one memory per data subject: a conversation sees its subject's only


class MemoryPolicy(_Section):
    """``[memory]``: how an agent's memory is divided between the people it serves."""

    isolation: Isolation = Isolation.AGENT


class EncryptionPolicy(_Section):
    """``[encryption]``: encryption at rest."""

    enabled: bool = False


class SummarizationPolicy(_Section):
    """``[summarization]``: which summarizers may see transcripts."""

    external_allowed: bool = True
    allowed_models: tuple[_ModelPattern, ...] = ("*",)
    fallback: SummarizationFallback = SummarizationFallback.LOCAL
    without_consent: WithoutConsent = WithoutConsent.ON_MISSING
    on_rectify: RectifySummaries = RectifySummaries.MARK

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        external = [m for m in self.allowed_models if not m.startswith(LOCAL_PREFIX)]
        if not self.external_allowed and external:
            raise ValueError(
                f"summarization.allowed_models lists {external}, which match external models, "
                "while summarization.external_allowed = false; list only 'local/...' models "
                "(e.g. ['local/*']) or set external_allowed = true"
            )
        if self.fallback is SummarizationFallback.LOCAL and not any(
            fnmatch.fnmatchcase(LOCAL_SUMMARIZER, m) for m in self.allowed_models
        ):
            raise ValueError(
                f"summarization.fallback = 'local' falls back to {LOCAL_SUMMARIZER!r}, which "
                f"summarization.allowed_models {list(self.allowed_models)} does not allow; "
                "add 'local/*' to allowed_models or set fallback = 'skip'"
            )
        return self


def _archive_count(value: Any) -> int | None:
    """``archives_max_count``: a whole number >= 1, or ``forever`` (no limit)."""
    if value is None or (isinstance(value, str) and value.strip().lower() in _NO_LIMIT):
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(
            f"{value!r} is not a count; write a whole number without quotes such as 10, "
            "or 'forever'"
        )
    count = value
    if count < 1:
        raise ValueError(
            f"{count} is {'negative' if count < 0 else 'zero'}: it would keep no archive at all "
            "(every compaction's archive deleted); use at least 1, or 'forever' for no limit"
        )
    return count


_NO_LIMIT = {"forever", "never", "none", "unlimited"}


class RetentionPolicy(_Section):
    """``[retention]``: how long each kind of artefact is kept (``forever`` = no limit)."""

    archives_max_age: OptionalDuration = None
    archives_max_count: Annotated[int | None, BeforeValidator(_archive_count)] = None
    idle_memory_max_age: OptionalDuration = None
    exports_max_age: OptionalDuration = None
    audit_min_age: Duration = _dt.timedelta(0)
    audit_max_age: OptionalDuration = None
    consent_records_max_age: OptionalDuration = None
    tombstones_max_age: OptionalDuration = None

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        if self.audit_max_age is not None and self.audit_max_age < self.audit_min_age:
            raise ValueError(
                "retention.audit_max_age is shorter than retention.audit_min_age; "
                "raise audit_max_age or lower audit_min_age"
            )
        for name in (
            "archives_max_age",
            "idle_memory_max_age",
            "exports_max_age",
            "audit_max_age",
            "consent_records_max_age",
            "tombstones_max_age",
        ):
            value = getattr(self, name)
            if value is not None and value < _dt.timedelta(hours=1):
                raise ValueError(
                    f"retention.{name} = {format_duration(value)} is under one hour, which would purge data "
                    "while it is in use; use at least '1h' or 'forever'"
                )
        idle = self.idle_memory_max_age
        if idle is not None and idle < _dt.timedelta(days=1):
            raise ValueError(
                f"retention.idle_memory_max_age = {format_duration(idle)} is under one day, "
                "which would wipe the memory of agents that merely paused; use at least '1d' "
                "or 'forever'"
            )
        return self


class SchedulePolicy(_Section):
    """``[schedule]``: when purges run (a cron expression or an interval)."""

    purge_cron: str | None = None
    purge_interval: OptionalDuration = None
    timezone: str = "UTC"

    @model_validator(mode="after")
    def _one_trigger(self) -> Self:
        if self.purge_cron and self.purge_interval:
            raise ValueError("set schedule.purge_cron or schedule.purge_interval, not both")
        try:
            zone = zoneinfo.ZoneInfo(self.timezone)
        except (zoneinfo.ZoneInfoNotFoundError, ValueError) as exc:
            raise ValueError(
                f"schedule.timezone {self.timezone!r} is not a known time zone; use an IANA "
                "name such as 'UTC' or 'Europe/Berlin'"
            ) from exc
        if self.purge_cron is not None:
            from apscheduler.triggers.cron import (  # type: ignore[import-untyped,unused-ignore]
                CronTrigger,
            )

            try:
                CronTrigger.from_crontab(self.purge_cron, timezone=zone)
            except ValueError as exc:
                raise ValueError(
                    f"schedule.purge_cron {self.purge_cron!r} is not a valid crontab "
                    f"expression ({exc}); write five fields, e.g. '0 3 * * *' for 03:00 daily"
                ) from exc
        if self.purge_interval is not None and self.purge_interval < _dt.timedelta(minutes=1):
            raise ValueError(
                f"schedule.purge_interval = {format_duration(self.purge_interval)} is under one "
                "minute; use at least '1m' (e.g. '1h')"
            )
        return self


class RequestsPolicy(_Section):
    """``[requests]``: the register of data-subject requests (docs/subject-requests.md).

    The legal time limit is fixed by GDPR Art. 12(3) (one month from receipt);
    ``internal_deadline`` is the office's own, shorter one, and ``warn_within``
    how early the scheduler reports a request coming due.
    """

    internal_deadline: OptionalDuration = None
    warn_within: Duration = _dt.timedelta(days=7)

    @model_validator(mode="after")
    def _sensible(self) -> Self:
        internal = self.internal_deadline
        if internal is not None and not _dt.timedelta(days=1) <= internal <= _dt.timedelta(days=31):
            raise ValueError(
                f"requests.internal_deadline = {format_duration(internal)} is outside 1d..31d: "
                "it is counted in whole days from receipt and is never later than the legal "
                "one month; use e.g. '21d', or 'forever' for none"
            )
        for name, value in (("internal_deadline", internal), ("warn_within", self.warn_within)):
            if value is not None and value.total_seconds() % 86400:
                raise ValueError(
                    f"requests.{name} = {format_duration(value)} is not a whole number of "
                    "days; deadlines are counted in days, e.g. '21d'"
                )
        if not _dt.timedelta(0) <= self.warn_within <= _dt.timedelta(days=31):
            raise ValueError(
                f"requests.warn_within = {format_duration(self.warn_within)} is outside "
                "0d..31d; use e.g. '7d' (0d: report overdue requests only)"
            )
        return self


class AuditPolicy(_Section):
    """``[audit]``: the local audit log and trace content."""

    enabled: bool = False
    log_dir: str | None = None
    include_content: bool = False
    include_subject_ids: bool = False


class Sync(StrEnum):
    """When an acknowledged write is on stable storage (docs/durability.md)."""

    OS = "os"
    """The kernel writes back when it chooses: a write survives a crash of the process, not a power cut."""
    COMMIT = "commit"
    """``fdatasync`` before returning (shared by concurrent writers): a write survives a power cut."""


def _sync(value: object) -> object:
    if isinstance(value, str) and value not in {s.value for s in Sync}:
        raise ValueError(
            f'durability.sync = {value!r} is unknown; use "os" (the reference\'s speed, a '
            'power cut may lose the newest adds) or "commit" (add() returns once the message '
            "and its audit entry are on disk); see docs/durability.md"
        )
    return value


class DurabilityPolicy(_Section):
    """``[durability]``: what an acknowledged add() survives (docs/durability.md).

    ``sync = "os"`` (default, the reference's behaviour): MEMORY.md appends are
    left to the kernel's writeback. ``sync = "commit"``: add() returns only
    when the message and its audit entry are durable, the message first, so
    the audit never records a write a power cut could still undo.
    """

    sync: Annotated[Sync, BeforeValidator(_sync)] = Sync.OS

    @property
    def commit(self) -> bool:
        """Whether every write is made durable before it is acknowledged."""
        return self.sync == Sync.COMMIT


class StoragePolicy(_Section):
    """``[storage]``: where the deployment keeps everything (docs/policies.md, docs/postgres.md).

    ``backend = "files"``: the workspace's files, as the reference lays them
    out. ``backend = "postgres"``: one PostgreSQL database for every host of
    the deployment, at ``GOVERNED_MEMORY_DATABASE_URL`` (else libpq's ``PG*``
    variables). Unset (the default): PostgreSQL when the database URL is set,
    else files. The URL itself is a secret and never goes in a policy file.
    """

    backend: Literal["files", "postgres"] | None = None


class EvidencePolicy(_Section):
    """``[evidence]``: signed receipts and signed audit checkpoints (docs/evidence.md).

    ``require_signing``: an erasure, rectification or export whose receipt
    cannot be signed (no signing key configured) is refused before anything
    is written. ``checkpoint_every``: how often the scheduler writes a signed
    audit checkpoint (``never``: only ``governed-memory audit checkpoint``).
    """

    require_signing: bool = False
    checkpoint_every: OptionalDuration = None

    @model_validator(mode="after")
    def _sane_interval(self) -> Self:
        every = self.checkpoint_every
        if every is not None and every < _dt.timedelta(minutes=1):
            raise ValueError(
                f"evidence.checkpoint_every = {format_duration(every)} is under one minute; "
                "use at least '1m' (e.g. '1d')"
            )
        return self


class Policy(_Section):
    """A complete, validated policy."""

    policy: PolicyMeta = PolicyMeta()
    consent: ConsentPolicy = ConsentPolicy()
    memory: MemoryPolicy = MemoryPolicy()
    encryption: EncryptionPolicy = EncryptionPolicy()
    summarization: SummarizationPolicy = SummarizationPolicy()
    retention: RetentionPolicy = RetentionPolicy()
    schedule: SchedulePolicy = SchedulePolicy()
    requests: RequestsPolicy = RequestsPolicy()
    audit: AuditPolicy = AuditPolicy()
    evidence: EvidencePolicy = EvidencePolicy()
    durability: DurabilityPolicy = DurabilityPolicy()
    storage: StoragePolicy = StoragePolicy()
    source: str = Field(default="built-in default", exclude=True)

    @model_validator(mode="after")
    def _no_contradictions(self) -> Self:
        audit, retention = self.audit, self.retention
        if not audit.enabled:
            on = [k for k in ("include_content", "include_subject_ids") if getattr(audit, k)]
            if on:
                raise ValueError(
                    f"contradiction: audit.{on[0]} = true while audit.enabled = false (nothing is "
                    f"audited); set audit.enabled = true or remove audit.{on[0]}"
                )
            if retention.audit_min_age > _dt.timedelta(0) or retention.audit_max_age is not None:
                raise ValueError(
                    "contradiction: retention.audit_min_age/audit_max_age govern audit records "
                    "while audit.enabled = false (none are written); set audit.enabled = true "
                    "or remove the audit retention keys"
                )
            if self.evidence.checkpoint_every is not None:
                raise ValueError(
                    "contradiction: evidence.checkpoint_every signs checkpoints of the audit log "
                    "while audit.enabled = false (there is no log); set audit.enabled = true or "
                    'set evidence.checkpoint_every = "never"'
                )
        if audit.include_content and self.encryption.enabled:
            raise ValueError(
                "contradiction: audit.include_content = true would copy message content in "
                "clear into the audit trail while encryption.enabled = true protects it at rest; "
                "set audit.include_content = false"
            )
        return self

    @property
    def id(self) -> str:
        return self.policy.id

    @property
    def version(self) -> str:
        return self.policy.version

    @property
    def is_default(self) -> bool:
        """True when the policy behaves exactly like the reference (no governed features)."""
        return (
            not self.consent.required_for and not self.encryption.enabled and not self.audit.enabled
        )


DEFAULT_POLICY = Policy()


SHIPPED_DIR = Path(__file__).parents[1] / "policies"
"""The ready policies shipped inside the package (also in the repository's policies/)."""

BUILT_IN = "built-in default"
POLICY_FILE = "policy file"


def shipped_policies() -> dict[str, Path]:
    """Name -> file of every policy shipped with the package (``default``, ``regulated``, ...)."""
    return {p.stem: p for p in sorted(SHIPPED_DIR.glob("*.toml"))}


def find_policy(name_or_path: str | Path) -> Path:
    """The file for a policy path, or for a shipped policy's name (``regulated``).

    An existing file wins over a shipped name (a folder of that name does not).

    Raises:
        PolicyError: neither a file nor a shipped name.
    """
    path = Path(name_or_path)
    shipped = shipped_policies()
    if path.is_file() or (path.exists() and str(name_or_path) not in shipped):
        return path  # a folder falls through to "is a folder" when read
    if str(name_or_path) in shipped:
        return shipped[str(name_or_path)]
    raise PolicyError(
        f"policy file {path} does not exist and is not a shipped policy name; "
        f"check the path or use one of {sorted(shipped)}"
    )


def load_policy(path: str | Path) -> Policy:
    """Read and validate a policy file (or a shipped policy by name).

    Raises:
        PolicyError: the file is missing, not TOML, or breaks a rule.
    """
    file = find_policy(path)
    return _validate(_read_toml(file), file, {})


@dataclass(frozen=True)
class ResolvedPolicy:
    """The effective policy and, per ``section.key``, where its value came from.

    Sources: ``built-in default``, ``policy file`` (``policy.source`` names
    it), ``environment`` (a ``GOVERNED_MEMORY_<SECTION>__<KEY>`` variable) or
    ``argument``.
    """

    policy: Policy
    sources: dict[str, str]


def resolve_policy(settings: Settings) -> ResolvedPolicy:
    """Build the effective policy: argument > environment > policy file > built-in default.

    Raises:
        PolicyError: the file or an override breaks a rule; the message names
            the file or variable, the key and the fix.
    """
    file = find_policy(settings.policy) if settings.policy is not None else None
    raw: dict[str, Any] = _read_toml(file) if file is not None else {}
    sources: dict[str, str] = {}
    for section, values in raw.items():
        if isinstance(values, dict):
            sources.update({f"{section}.{key}": POLICY_FILE for key in values})
    overrides = settings.policy_overrides()
    origins: dict[str, str] = {}
    for section, values in overrides.items():
        merged = dict(raw.get(section) or {}) if isinstance(raw.get(section), dict) else {}
        for key, value in values.items():
            merged[key] = value
            origin = settings.source_of(f"{section}.{key}")
            sources[f"{section}.{key}"] = origin
            origins[f"{section}.{key}"] = (
                f"environment variable GOVERNED_MEMORY_{section.upper()}__{key.upper()}"
                if origin == "environment"
                else f"argument {section}={{{key!r}: ...}}"
            )
        raw[section] = merged
    policy = _validate(raw, file, origins)
    for name, section_field in Policy.model_fields.items():
        if name == "source":
            continue
        section_model = section_field.annotation
        for key in getattr(section_model, "model_fields", {}):
            sources.setdefault(f"{name}.{key}", BUILT_IN)
    return ResolvedPolicy(policy=policy, sources=dict(sorted(sources.items())))


def _read_toml(file: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError as exc:
        raise PolicyError(f"policy file {file} does not exist; check the path") from exc
    except IsADirectoryError as exc:
        raise PolicyError(f"policy file {file} is a folder; give the path of a .toml file") from exc
    except (OSError, UnicodeDecodeError) as exc:
        raise PolicyError(f"policy file {file} cannot be read: {exc}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise PolicyError(
            f"policy file {file} is not valid TOML: {exc}; fix the syntax (see docs/policies.md)"
        ) from exc


def _validate(raw: dict[str, Any], file: Path | None, origins: dict[str, str]) -> Policy:
    """Validate strictly: TOML has types, so ``enabled = "yes"`` is an error, not ``True``."""
    if "source" in raw:
        raw = {k: v for k, v in raw.items() if k != "source"}
        where = f"policy file {file}" if file is not None else "the policy"
        raise PolicyError(
            f"{where} is not valid:\n  source: unknown key; remove it (the source of a policy "
            "is where it was loaded from)"
        )
    try:
        policy = Policy.model_validate_json(json.dumps(raw, default=str), strict=True)
    except ValidationError as exc:
        raise PolicyError(_describe(file, exc, origins)) from exc
    return policy.model_copy(update={"source": str(file) if file is not None else BUILT_IN})


_TYPE_FIXES = {
    "bool_type": "; write true or false, without quotes",
    "int_type": "; write a whole number, without quotes",
    "int_from_float": "; write a whole number, without a fraction",
    "string_type": '; write a quoted string, e.g. "UTC"',
    "tuple_type": '; write a list, e.g. ["persist", "summarize"]',
    "list_type": '; write a list, e.g. ["persist", "summarize"]',
    "string_pattern_mismatch": " (see docs/policies.md for the allowed characters)",
    "missing": "; add the key",
}


def _describe(file: Path | None, exc: ValidationError, origins: dict[str, str]) -> str:
    where = f"policy file {file}" if file is not None else "the built-in default policy"
    lines = [
        f"{where} is not valid (with the overrides applied):"
        if origins
        else f"{where} is not valid:"
    ]
    for err in exc.errors():
        key = ".".join(str(p) for p in err["loc"])
        if not key:  # a rule across sections: the message names the keys
            lines.append(f"  {err['msg'].removeprefix('Value error, ')}")
            continue
        if err["type"] == "extra_forbidden":
            msg = "unknown key; remove it or check its spelling against docs/policies.md"
        else:
            msg = err["msg"].removeprefix("Value error, ") + _TYPE_FIXES.get(err["type"], "")
        origin = f" [set by {origins[key]}]" if key in origins else ""
        given = err.get("input")
        got = "" if isinstance(given, dict) else f" (got {given!r})"
        lines.append(f"  {key}: {msg}{got}{origin}")
    return "\n".join(lines)
