"""Runtime settings: the one place that reads the environment.

Every variable starts with ``GOVERNED_MEMORY_`` except ``WORKSPACE_DIR``,
which keeps the reference's meaning. Secrets (master key, audit key, signing
key, OTLP headers) are :class:`pydantic.SecretStr`: ``repr``, ``str`` and the CLI show
``**********``, never the value.

Policy values may be overridden per deployment, one key at a time:
``GOVERNED_MEMORY_<SECTION>__<KEY>`` (double underscore), e.g.
``GOVERNED_MEMORY_AUDIT__LOG_DIR=/var/log/gm``, or ``Settings(audit={...})``.
Precedence, highest first: constructor argument > environment > policy file >
built-in default. ``governed-memory policy show`` prints where each value came
from. See docs/settings.md.
"""

from __future__ import annotations

import difflib
import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import AliasChoices, Field, PrivateAttr, SecretStr, ValidationError
from pydantic_settings import BaseSettings, SettingsConfigDict

from .._errors import ConfigurationError

__all__ = ["ENV_PREFIX", "OVERRIDABLE_SECTIONS", "Settings"]

ENV_PREFIX = "GOVERNED_MEMORY_"
OVERRIDABLE_SECTIONS = (
    "consent",
    "encryption",
    "summarization",
    "retention",
    "schedule",
    "audit",
    "evidence",
    "durability",
)


class Settings(BaseSettings):
    """Deployment settings, from constructor arguments and the environment.

    Args:
        policy: path of the policy file (``GOVERNED_MEMORY_POLICY``); None
            means the built-in default policy. A shipped policy's name
            (``regulated``) also works.
        workspace_dir: the workspace (``WORKSPACE_DIR``, no prefix).
        master_key: base64 master key for encryption at rest
            (``GOVERNED_MEMORY_MASTER_KEY``).
        master_key_file: file holding the master key
            (``GOVERNED_MEMORY_MASTER_KEY_FILE``).
        master_key_old, master_key_old_file: the previous master key, still
            accepted for unwrapping during a rotation
            (``GOVERNED_MEMORY_MASTER_KEY_OLD``, ``..._OLD_FILE``).
        keyring_dir: where the wrapped data keys live
            (``GOVERNED_MEMORY_KEYRING_DIR``; default
            ``<workspace>/.governed_memory/keyring``). See SECURITY.md on
            keeping it out of workspace backups.
        database_url: the PostgreSQL database every host of the deployment
            shares (``GOVERNED_MEMORY_DATABASE_URL``; a libpq URL
            ``postgresql://user@host:5432/db`` or a ``key=value`` string).
            Set with no ``[storage]`` table in the policy, it selects the
            PostgreSQL backend; never printed (``policy show`` says ``set``).
        audit_key: key that signs the audit log's hash chain
            (``GOVERNED_MEMORY_AUDIT_KEY``).
        signing_key: base64 Ed25519 private key that signs receipts and
            audit checkpoints (``GOVERNED_MEMORY_SIGNING_KEY``; docs/evidence.md).
        signing_key_file: file holding the signing key, refused when group or
            others may read it (``GOVERNED_MEMORY_SIGNING_KEY_FILE``).
        otlp_endpoint: OpenTelemetry OTLP/HTTP endpoint; None exports no spans
            (``GOVERNED_MEMORY_OTLP_ENDPOINT``, else the standard
            ``OTEL_EXPORTER_OTLP_ENDPOINT``).
        otlp_headers: OTLP headers, ``key=value,key=value`` (often a token;
            ``GOVERNED_MEMORY_OTLP_HEADERS``, else ``OTEL_EXPORTER_OTLP_HEADERS``).
        service_name: the OpenTelemetry ``service.name``
            (``GOVERNED_MEMORY_SERVICE_NAME``, else ``OTEL_SERVICE_NAME``).
        actor: who operates the command line, recorded (as a keyed hash) in
            the audit entries of the operations they run
            (``GOVERNED_MEMORY_ACTOR``). None (the default): the command line
            names the login of the password database (``cli:<login>``), which
            no variable can change.
        consent, encryption, summarization, retention, schedule, audit, evidence,
            durability: per-key overrides of the policy's sections.

    Raises:
        ConfigurationError: a value has the wrong type or an unknown name.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
        populate_by_name=True,
        hide_input_in_errors=True,
    )

    policy: Path | None = None
    workspace_dir: Path | None = Field(
        default=None, validation_alias=AliasChoices("workspace_dir", "WORKSPACE_DIR")
    )
    master_key: SecretStr | None = None
    master_key_file: Path | None = None
    master_key_old: SecretStr | None = None
    master_key_old_file: Path | None = None
    keyring_dir: Path | None = None
    database_url: SecretStr | None = None
    audit_key: SecretStr | None = None
    signing_key: SecretStr | None = None
    signing_key_file: Path | None = None
    # Ours first, then the standard OpenTelemetry variable: a deployment that
    # sets both for different consumers keeps governed_memory's own choice.
    otlp_endpoint: str | None = Field(
        default=None,
        validation_alias=AliasChoices(
            "otlp_endpoint", "GOVERNED_MEMORY_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT"
        ),
    )
    otlp_headers: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices(
            "otlp_headers", "GOVERNED_MEMORY_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_HEADERS"
        ),
    )
    service_name: str = Field(
        default="governed-memory",
        validation_alias=AliasChoices(
            "service_name", "GOVERNED_MEMORY_SERVICE_NAME", "OTEL_SERVICE_NAME"
        ),
    )
    actor: str | None = Field(default=None, min_length=1, max_length=200)

    consent: dict[str, Any] = Field(default_factory=dict)
    encryption: dict[str, Any] = Field(default_factory=dict)
    summarization: dict[str, Any] = Field(default_factory=dict)
    retention: dict[str, Any] = Field(default_factory=dict)
    schedule: dict[str, Any] = Field(default_factory=dict)
    audit: dict[str, Any] = Field(default_factory=dict)
    evidence: dict[str, Any] = Field(default_factory=dict)
    durability: dict[str, Any] = Field(default_factory=dict)

    _arguments: frozenset[str] = PrivateAttr(default=frozenset())

    def __init__(self, **values: Any) -> None:
        try:
            super().__init__(**values)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
            )
            raise ConfigurationError(
                f"settings are not valid: {problems}. Check the GOVERNED_MEMORY_* environment "
                "variables and arguments against docs/settings.md"
            ) from None
        _refuse_unknown_variables(os.environ, set(type(self).model_fields))
        names: set[str] = set()
        for key, value in values.items():
            name = "workspace_dir" if key == "WORKSPACE_DIR" else key
            if name in OVERRIDABLE_SECTIONS and isinstance(value, dict):
                names.update(f"{name}.{sub}" for sub in value)
            else:
                names.add(name)
        self._arguments = frozenset(names)

    def source_of(self, name: str) -> str:
        """``argument`` or ``environment`` for a setting (or ``section.key`` override) that is set."""
        return "argument" if name in self._arguments else "environment"

    def policy_overrides(self) -> dict[str, dict[str, Any]]:
        """The per-key policy overrides, environment strings decoded as JSON where they parse.

        ``"true"`` becomes ``True``, ``"3"`` becomes ``3`` and ``'["a"]'`` a list;
        anything else (``30d``) stays a string for the policy to validate.
        """
        result: dict[str, dict[str, Any]] = {}
        for section in OVERRIDABLE_SECTIONS:
            values: dict[str, Any] = getattr(self, section)
            if values:
                result[section] = {
                    key: _decode(value)
                    if self.source_of(f"{section}.{key}") == "environment"
                    else value
                    for key, value in values.items()
                }
        return result


_FIXED_SECTIONS = {
    "memory": "says how the files of every agent are laid out, so every process must agree "
    "(docs/policies.md, [memory])",
}
"""Policy sections an override may not change, and why."""


def _refuse_unknown_variables(environ: Mapping[str, str], fields: set[str]) -> None:
    """A misspelt ``GOVERNED_MEMORY_*`` variable must not be ignored silently."""
    known = {f"{ENV_PREFIX}{name}".upper() for name in fields if name != "workspace_dir"}
    for variable in environ:
        upper = variable.upper()
        if not upper.startswith(ENV_PREFIX) or upper in known:
            continue
        section, sep, key = upper[len(ENV_PREFIX) :].partition("__")
        if sep and key and section.lower() in OVERRIDABLE_SECTIONS:
            continue  # a policy override; the policy validates the key
        if sep and section.lower() in _FIXED_SECTIONS:
            raise ConfigurationError(
                f"environment variable {variable} would override [{section.lower()}] of the "
                f"policy, which {_FIXED_SECTIONS[section.lower()]}; set it in your copy of the "
                "policy file (and bump its version), then unset the variable"
            )
        close = difflib.get_close_matches(upper, sorted(known), n=1)
        hint = f"did you mean {close[0]}? " if close else ""
        raise ConfigurationError(
            f"environment variable {variable} is not a governed_memory setting; {hint}"
            "see docs/settings.md for the names (policy overrides are "
            "GOVERNED_MEMORY_<SECTION>__<KEY>), or unset it"
        )


def _decode(value: Any) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value
