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
"""

from __future__ import annotations

import datetime as _dt
import logging
from typing import TYPE_CHECKING

from ._governance import Governance as GovernanceRoot

if TYPE_CHECKING:
    from ._records import ConsentEvent
    from ._subjects import ErasureGuard

__all__ = ["Governance"]

logger = logging.getLogger("governed_memory")


class Governance(GovernanceRoot):
    __doc__ = GovernanceRoot.__doc__

    def erasure_watch(self, agent: str) -> ErasureGuard:
        """The tombstone watch of ``agent`` (pending erasures complete on open)."""
        # Imported on use, as before the split: building a Governance loads no erasure code.
        from ._subjects import ErasureGuard, subject_context

        return ErasureGuard(subject_context(self), agent)

    def _erase_after_withdrawal(self, event: ConsentEvent) -> None:
        from ._subjects import ErasureBlockedError, erase, schedule_erasure

        grace = self.policy.consent.erase_grace
        reason = (
            f"consent '{event.purpose}' withdrawn at {event.at} under policy {event.policy_id} "
            f"v{event.policy_version} (consent.on_withdraw = 'erase')"
        )
        try:
            if grace > _dt.timedelta(0):
                schedule_erasure(
                    self, subject=event.subject, grace=grace, reason=reason, actor=event.actor
                )
            else:
                erase(self, subject=event.subject, reason=reason, actor=event.actor)
        except ErasureBlockedError as exc:
            logger.warning(
                "governed_memory: the withdrawal of %r is recorded, but its erasure is blocked: %s",
                event.subject,
                exc,
            )
