"""Policy files: the shipped ones load; every kind of invalid one is refused with file + key + fix."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from governed_memory import Policy, PolicyError, Settings, load_policy, resolve_policy
from governed_memory._policy._model import (
    DEFAULT_POLICY,
    MissingConsent,
    SummarizationFallback,
    Sync,
    find_policy,
    shipped_policies,
)

REPO = Path(__file__).resolve().parents[2]


def write(tmp_path: Path, text: str, name: str = "policy.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def refused(path: Path) -> str:
    with pytest.raises(PolicyError) as info:
        load_policy(path)
    message = str(info.value)
    assert str(path) in message
    return message


# -- shipped policies -----------------------------------------------------


@pytest.mark.parametrize("name", ["default", "regulated", "hipaa"])
def test_each_shipped_policy_loads_by_name_and_by_path(name: str) -> None:
    by_name = load_policy(name)
    by_path = load_policy(REPO / "policies" / f"{name}.toml")
    assert by_name.id == name
    assert by_name.model_dump() == by_path.model_dump()


def test_repository_policies_are_the_packaged_ones() -> None:
    """policies/ and governed_memory/policies/ must not drift apart."""
    packaged = shipped_policies()
    repo = {p.stem: p for p in (REPO / "policies").glob("*.toml")}
    assert set(packaged) == set(repo) == {"default", "regulated", "hipaa"}
    for name, path in packaged.items():
        assert path.read_bytes() == repo[name].read_bytes(), name


def test_default_toml_behaves_like_the_built_in_default() -> None:
    shipped = load_policy("default").model_dump()
    built_in = DEFAULT_POLICY.model_dump()
    shipped["policy"].pop("description")
    built_in["policy"].pop("description")
    assert shipped == built_in
    assert load_policy("default").is_default


def test_shipped_policy_lines_are_all_commented() -> None:
    """Every key=value line carries a comment explaining it."""
    for path in shipped_policies().values():
        for number, line in enumerate(path.read_text().splitlines(), 1):
            if "=" in line and not line.lstrip().startswith("#"):
                assert "#" in line, f"{path.name}:{number} has no comment"


def test_regulated_policy_requires_consent_encrypts_and_audits() -> None:
    policy = load_policy("regulated")
    assert set(policy.consent.required_for) == {"persist", "summarize"}
    assert policy.encryption.enabled and policy.audit.enabled
    assert policy.retention.archives_max_age == dt.timedelta(days=30)
    assert policy.consent.on_missing is MissingConsent.MEMORY_ONLY


def test_hipaa_policy_keeps_audit_six_years_and_bans_external_summarizers() -> None:
    policy = load_policy("hipaa")
    assert policy.encryption.enabled and policy.audit.enabled
    assert policy.retention.audit_min_age >= dt.timedelta(days=6 * 365)
    assert not policy.summarization.external_allowed
    assert policy.summarization.fallback is SummarizationFallback.LOCAL


def test_an_existing_file_wins_over_a_shipped_name(tmp_path: Path) -> None:
    path = write(tmp_path, '[policy]\nid = "mine"\n', name="regulated")
    assert find_policy(path) == path


# -- invalid policies -----------------------------------------------------


def test_missing_file_is_refused_with_the_shipped_names(tmp_path: Path) -> None:
    message = refused(tmp_path / "nope.toml")
    assert "does not exist" in message and "regulated" in message


def test_bad_toml_is_refused_with_the_position(tmp_path: Path) -> None:
    message = refused(write(tmp_path, "[consent\nrequired_for = 1\n"))
    assert "not valid TOML" in message and "line 1" in message


def test_unknown_key_is_named_with_the_fix(tmp_path: Path) -> None:
    message = refused(write(tmp_path, "[encryption]\nenabeld = true\n"))
    assert "encryption.enabeld: unknown key" in message
    assert "spelling" in message


def test_unknown_section_is_refused(tmp_path: Path) -> None:
    message = refused(write(tmp_path, "[encrypt]\nenabled = true\n"))
    assert "encrypt: unknown key" in message


def test_source_cannot_be_set_from_a_file(tmp_path: Path) -> None:
    message = refused(write(tmp_path, 'source = "elsewhere"\n'))
    assert "source: unknown key" in message


@pytest.mark.parametrize(
    ("text", "key", "fix"),
    [
        ('[encryption]\nenabled = "yes"\n', "encryption.enabled", "true or false"),
        ('[retention]\narchives_max_count = "3"\n', "retention.archives_max_count", "whole number"),
        ("[retention]\narchives_max_count = 2.5\n", "retention.archives_max_count", "whole number"),
        ('[consent]\nrequired_for = "persist"\n', "consent.required_for", "list"),
        ('[consent]\non_missing = "drop"\n', "consent.on_missing", "'memory_only' or 'deny'"),
        ("[schedule]\ntimezone = 3\n", "schedule.timezone", "quoted string"),
        ('[retention]\narchives_max_age = "30 days"\n', "retention.archives_max_age", "'30d'"),
    ],
)
def test_wrong_type_is_named_with_the_fix(tmp_path: Path, text: str, key: str, fix: str) -> None:
    message = refused(write(tmp_path, text))
    assert key in message and fix in message


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("[retention]\narchives_max_count = 0\n", "retention.archives_max_count"),
        ('[retention]\narchives_max_age = "10m"\n', "retention.archives_max_age"),
        (
            '[retention]\naudit_min_age = "6y"\naudit_max_age = "1y"\n[audit]\nenabled = true\n',
            "audit_max_age",
        ),
        ('[schedule]\npurge_cron = "61 * * * *"\n', "schedule.purge_cron"),
        ('[schedule]\npurge_interval = "10s"\n', "schedule.purge_interval"),
        ('[schedule]\ntimezone = "Mars/Olympus"\n', "schedule.timezone"),
        ('[policy]\nid = "has space"\n', "policy.id"),
        ('[consent]\npurposes = ["persist"]\n', "built-in purposes"),
        ('[consent]\npurposes = ["persist", "summarize", "Bad Name"]\n', "consent.purposes"),
        ('[consent]\nrequired_for = ["marketing"]\n', "consent.required_for"),
    ],
)
def test_out_of_range_value_is_named(tmp_path: Path, text: str, key: str) -> None:
    assert key in refused(write(tmp_path, text))


@pytest.mark.parametrize(
    ("text", "keys"),
    [
        (
            "[summarization]\nexternal_allowed = false\n",
            ["summarization.allowed_models", "external_allowed = false", "local/*"],
        ),
        (
            '[summarization]\nallowed_models = ["azure/*"]\n',
            ["summarization.fallback", "local/extractive", "fallback = 'skip'"],
        ),
        ("[audit]\ninclude_content = true\n", ["audit.include_content", "audit.enabled = true"]),
        ('[retention]\naudit_min_age = "6y"\n', ["retention.audit_min_age", "audit.enabled"]),
        (
            "[audit]\nenabled = true\ninclude_content = true\n[encryption]\nenabled = true\n",
            ["audit.include_content", "encryption.enabled"],
        ),
        ('[consent]\nerase_grace = "3d"\n', ["consent.erase_grace", "on_withdraw = 'erase'"]),
        (
            '[schedule]\npurge_cron = "0 3 * * *"\npurge_interval = "1d"\n',
            ["purge_cron", "purge_interval", "not both"],
        ),
    ],
)
def test_contradiction_names_both_keys_and_the_fix(
    tmp_path: Path, text: str, keys: list[str]
) -> None:
    message = refused(write(tmp_path, text))
    for key in keys:
        assert key in message


def test_valid_custom_policy_with_extra_purpose_loads(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        '[policy]\nid = "bank"\nversion = "2024.1"\n'
        '[consent]\npurposes = ["persist", "summarize", "analytics"]\n'
        'required_for = ["persist", "analytics"]\non_missing = "deny"\n'
        '[summarization]\nexternal_allowed = false\nallowed_models = ["local/*"]\n'
        '[retention]\narchives_max_age = "1y30d"\narchives_max_count = 10\n',
    )
    policy = load_policy(path)
    assert (policy.id, policy.version) == ("bank", "2024.1")
    assert policy.consent.required_for == ("persist", "analytics")
    assert policy.retention.archives_max_age == dt.timedelta(days=395)
    assert policy.source == str(path)


# -- effective policy and provenance ----------------------------------------


def test_no_policy_configured_is_the_built_in_default() -> None:
    resolved = resolve_policy(Settings())
    assert resolved.policy == DEFAULT_POLICY
    assert set(resolved.sources.values()) == {"built-in default"}


def test_every_policy_key_has_a_source() -> None:
    resolved = resolve_policy(Settings(policy="regulated"))
    expected = {
        f"{section}.{key}"
        for section, field in Policy.model_fields.items()
        if section != "source"
        for key in field.annotation.model_fields  # type: ignore[union-attr]
    }
    assert set(resolved.sources) == expected
    assert resolved.sources["encryption.enabled"] == "policy file"
    assert resolved.sources["retention.archives_max_count"] == "built-in default"


def test_override_breaking_a_rule_names_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GOVERNED_MEMORY_AUDIT__ENABLED", "false")
    with pytest.raises(PolicyError) as info:
        resolve_policy(Settings(policy="hipaa"))
    assert "retention.audit_min_age" in str(info.value)
    monkeypatch.setenv("GOVERNED_MEMORY_AUDIT__ENABLED", "maybe")
    with pytest.raises(PolicyError) as info:
        resolve_policy(Settings(policy="hipaa"))
    assert "GOVERNED_MEMORY_AUDIT__ENABLED" in str(info.value)


def test_a_folder_named_like_a_shipped_policy_does_not_hide_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "regulated").mkdir()
    assert load_policy("regulated").id == "regulated"


def test_a_folder_is_refused_as_a_policy_file(tmp_path: Path) -> None:
    assert "is a folder" in refused(tmp_path)


# -- durability ------------------------------------------------------------


def test_durability_defaults_to_os_and_the_regulated_policies_commit() -> None:
    assert DEFAULT_POLICY.durability.sync is Sync.OS and not DEFAULT_POLICY.durability.commit
    assert load_policy("default").durability.sync is Sync.OS
    for name in ("regulated", "hipaa"):
        assert load_policy(name).durability.commit, name


def test_an_unknown_sync_mode_names_the_value_and_the_allowed_ones(tmp_path: Path) -> None:
    message = refused(write(tmp_path, '[durability]\nsync = "fsync"\n'))
    assert "durability.sync = 'fsync' is unknown" in message
    assert '"os"' in message and '"commit"' in message and "docs/durability.md" in message


def test_sync_can_be_overridden_from_the_settings() -> None:
    settings = Settings(durability={"sync": "commit"})
    assert resolve_policy(settings).policy.durability.commit
