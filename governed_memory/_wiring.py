"""The public Governance: the composition root with the erasure operations wired in.

``governed_memory._governance.Governance`` builds the collaborators from
settings (policy, consent registry, audit sink, keyring, sealing, store
factory, the ``PolicyGate``) and passes the gate's methods on to it, so it is
the consent gate every governed Conversation consults; the operations
(``_subjects``, ``_retention``, ``_keys``) take it as their target.
Two of the gate's reactions are subject operations, which live a layer above
it: erasing a subject's records when ``persist`` consent is withdrawn under
``consent.on_withdraw = "erase"``, and the erasure watch a live Conversation
keeps. This module sits above the operations and wires both in, so no layer
imports upwards; ``governed_memory.Governance`` (and the CLI) build this class.

It also keeps the one Governance per workspace, policy and storage a process shares
(:func:`shared_governance`): the gate every Conversation, Agent and
ContextCompressor built without ``governance=`` runs under when the settings
configure a policy (the root package hands it to the memory layer through
``governed_memory._protocols.resolve_governance``), and the one every CLI
command uses. It is the one process-wide cache of the package, on purpose:
one consent gate, one audit chain and one keyring per workspace and policy,
however many conversations a process opens.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import logging
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import SecretStr

from ._base import resolve_workspace
from ._errors import ConfigurationError
from ._governance import Governance as GovernanceRoot
from ._policy import DEFAULT_POLICY, Settings

if TYPE_CHECKING:
    from ._records import ConsentEvent
    from ._subjects import ErasureGuard

__all__ = ["Governance", "policy_named_by", "refuse_ungoverned", "shared_governance"]

logger = logging.getLogger("governed_memory")


class Governance(GovernanceRoot):
    __doc__ = GovernanceRoot.__doc__

    def erasure_watch(self, agent: str) -> ErasureGuard:
        """The tombstone watch of ``agent`` (pending erasures complete on open)."""
        # Imported on use, as before the split: building a Governance loads no erasure code.
        from ._subjects import ErasureGuard, subject_context

        return ErasureGuard(subject_context(self), agent)

    def _erase_after_withdrawal(self, event: ConsentEvent) -> None:
        """Erase (or schedule the erasure of) a subject whose ``persist`` consent was withdrawn.

        The erasure is a request of the person's (Art. 17(1)(b)): it is entered
        in the request register first, as a follow-up opened by the library,
        so a hold that blocks it (or a file it cannot reach) leaves an open
        request with the reason, and the erasure's receipt closes it.
        """
        from ._records import ErasureScope
        from ._subjects import (
            ErasureBlockedError,
            erase,
            follow_up,
            schedule_erasure,
            subject_context,
        )

        grace = self.policy.consent.erase_grace
        reason = (
            f"consent '{event.purpose}' withdrawn at {event.at} under policy {event.policy_id} "
            f"v{event.policy_version} (consent.on_withdraw = 'erase')"
        )
        follow_up(
            subject_context(self),
            ErasureScope(subject=event.subject, agent=None),
            reason=reason,
            actor=event.actor,
            source="consent-withdrawal",
            blocked=False,
        )
        try:
            if grace > _dt.timedelta(0):
                schedule_erasure(
                    self, subject=event.subject, grace=grace, reason=reason, actor=event.actor
                )
            else:
                erase(self, subject=event.subject, reason=reason, actor=event.actor)
        except ErasureBlockedError as exc:
            # Logs leave the workspace: the subject by its keyed hash, the holds by id.
            logger.warning(
                "governed_memory: the withdrawal of subject %s is recorded, but its erasure is "
                "blocked by legal hold(s) %s; it is an open request in the register "
                "(`governed-memory requests list`): erase once they are released",
                self.gate.subject_ref(event.subject),
                ", ".join(h.id for h in exc.holds) or "?",
            )


_SHARED: dict[tuple[object, ...], Governance] = {}
_SHARED_LOCK = threading.Lock()


def shared_governance(settings: Settings | None = None) -> Governance:
    """The process's Governance for ``settings`` (default: ``Settings()``, from the environment).

    One per workspace and policy: the same settings (workspace, policy file as
    it is on disk now, overrides, keys) give the same object, built once even
    when threads ask at the same time. Building it writes nothing.

    Raises:
        ConfigurationError: the settings are not valid (an unknown
            ``GOVERNED_MEMORY_*`` variable, a missing policy file, ...).
    """
    settings = settings if settings is not None else Settings()
    workspace = resolve_workspace(settings.workspace_dir).absolute()
    key = (workspace, *_fingerprint(settings))
    governance = _SHARED.get(key)
    if governance is None:
        with _SHARED_LOCK:
            governance = _SHARED.get(key)
            if governance is None:
                governance = Governance(settings=settings, workspace=workspace)
                _SHARED[key] = governance
    return governance


def _fingerprint(settings: Settings) -> tuple[object, ...]:
    """What tells two settings' policies apart; secrets only as digests."""
    values: list[object] = []
    for name in sorted(type(settings).model_fields):
        value = getattr(settings, name)
        if isinstance(value, SecretStr):
            # surrogateescape: an environment value that is not UTF-8 is still a key
            # (refused, with its name, by whoever reads it), not a crash here.
            secret = value.get_secret_value().encode("utf-8", "surrogateescape")
            value = hashlib.sha256(secret).hexdigest()
        elif isinstance(value, dict):
            continue  # the overrides, decoded, below
        values.append((name, value))
    values.append(json.dumps(settings.policy_overrides(), sort_keys=True, default=str))
    if settings.policy is not None:
        try:  # an edited policy file is another policy
            stat = Path(settings.policy).stat()
            values.append((stat.st_mtime_ns, stat.st_size))
        except OSError:
            values.append(None)  # a shipped policy's name (or a missing file: the build says so)
    return tuple(values)


def policy_named_by(settings: Settings) -> list[str]:
    """The settings that configure a policy: ``GOVERNED_MEMORY_POLICY=...`` and the overrides."""
    named = []
    if settings.policy is not None:
        named.append(
            f"GOVERNED_MEMORY_POLICY={settings.policy}"
            if settings.source_of("policy") == "environment"
            else f"the argument policy={str(settings.policy)!r}"
        )
    for section, values in settings.policy_overrides().items():
        for key in values:
            named.append(
                f"GOVERNED_MEMORY_{section.upper()}__{key.upper()}"
                if settings.source_of(f"{section}.{key}") == "environment"
                else f"the argument {section}={{{key!r}: ...}}"
            )
    return named


def refuse_ungoverned(what: str, settings: Settings | None = None) -> None:
    """Refuse to run ``what`` ungoverned when the settings configure a policy other than the default.

    Raises:
        ConfigurationError: names the policy, where it is configured, and both fixes.
    """
    governance = shared_governance(settings)
    policy = governance.policy
    storage = governance.storage
    if storage.files is None:
        # Ungoverned memory is the reference's files in the workspace: with a
        # database configured, that would be a second, disconnected memory.
        raise ConfigurationError(
            f"{what} asks to run without governance, but this deployment stores in "
            f"{storage.kind} ({storage.where}); leave governance= out (or pass a "
            "governed_memory.Governance) to store there, or unset GOVERNED_MEMORY_DATABASE_URL "
            "and [storage] backend to keep memory in the workspace's files"
        )
    if policy.model_dump(exclude={"policy"}) == DEFAULT_POLICY.model_dump(exclude={"policy"}):
        return  # it rules as the default policy does (id, description aside): default mode
    named = " and ".join(policy_named_by(governance.settings)) or "the settings"
    raise ConfigurationError(
        f"{what} asks to run without governance, but policy {policy.id!r} v{policy.version} "
        f"({policy.source}) governs this process, configured by {named}; leave governance= "
        "out (or pass a governed_memory.Governance) to run under that policy, or unset "
        f"{named} so that no policy is configured"
    )
