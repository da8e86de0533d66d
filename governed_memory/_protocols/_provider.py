"""The slot for the configured policy's gate provider, which the root package fills.

Its own module, importing nothing at run time, so that ``import
governed_memory`` (which installs the provider) loads none of the protocol
modules and their standard-library dependencies: ``governed-memory --help``
starts without them (docs/cli.md, "Start-up"). What a provider is, and how
Conversation, Agent and ContextCompressor use it, is in ``_gate``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ._gate import ConsentGate, GovernanceProvider
    from ._storage import AgentStore

__all__ = [
    "default_governance",
    "install_governance_provider",
    "installed_provider",
    "policy_configured",
]

_provider: GovernanceProvider | None = None


def install_governance_provider(provider: GovernanceProvider | None) -> GovernanceProvider | None:
    """Install ``provider`` (None: none, every default Conversation runs in default mode); return the previous one."""
    global _provider
    previous, _provider = _provider, provider
    return previous


def policy_configured() -> bool:
    """Whether the settings name a policy (False without a provider)."""
    provider = _provider
    return provider is not None and provider.configured()


def default_governance() -> ConsentGate[AgentStore] | None:
    """The configured policy's shared gate, or None when no policy is configured."""
    provider = _provider
    if provider is None or not provider.configured():
        return None
    return provider.governance()


def installed_provider() -> GovernanceProvider | None:
    """The provider installed now (None: every default Conversation runs in default mode)."""
    return _provider
