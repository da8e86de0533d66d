"""What every CLI command receives: the global options, resolved lazily."""

from __future__ import annotations

import os
import pwd
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from .._base import resolve_workspace
from ._boundary import check_folder_setting

if TYPE_CHECKING:
    from .._audit import ActorSink
    from .._governance import AuditSink
    from .._policy import Settings
    from .._protocols import DeploymentStorage
    from .._wiring import Governance

__all__ = ["ACTOR_DEFAULT_HELP", "CliContext", "actor_option", "login_actor"]

ACTOR_DEFAULT_HELP = "default: $GOVERNED_MEMORY_ACTOR, else cli:<your login name>"
"""How every ``--actor`` option states its default (the rule of :meth:`CliContext.actor`)."""

actor_option = click.option(
    "--actor",
    default=None,
    help=f"Who runs this, recorded as a keyed hash in its audit entries ({ACTOR_DEFAULT_HELP}).",
)
"""``--actor`` of the commands an operator runs on personal data or keys."""


def login_actor() -> str:
    """``cli:<login>``: the account of the real uid in the password database (``cli:uid-<n>`` without one).

    Not ``$USER`` or ``$LOGNAME`` (which ``getpass.getuser`` reads first): an
    unstated actor must not come from a variable anyone can set by accident.
    Naming someone else is an explicit act (``--actor``, GOVERNED_MEMORY_ACTOR).
    """
    try:
        return f"cli:{pwd.getpwuid(os.getuid()).pw_name}"
    except KeyError:
        return f"cli:uid-{os.getuid()}"


@dataclass
class CliContext:
    """Global options of the ``governed-memory`` command."""

    workspace_arg: Path | None
    policy_arg: Path | None
    _spans_exported: bool = field(default=False, init=False, repr=False)
    _closing: list[Callable[[], None]] = field(default_factory=list, init=False, repr=False)

    @property
    def workspace(self) -> Path:
        """The workspace folder, resolved as the library does."""
        return resolve_workspace(self.workspace_arg)

    def settings(self, **arguments: Any) -> Settings:
        """Settings from the environment, with ``--policy``/``--workspace`` (and ``arguments``) on top."""
        from .._policy import Settings

        given: dict[str, Any] = dict(arguments)
        if self.policy_arg is not None:
            given.setdefault("policy", self.policy_arg)
        if self.workspace_arg is not None:
            given.setdefault("workspace_dir", self.workspace_arg)
        settings = Settings(**given)
        check_folder_setting("GOVERNED_MEMORY_KEYRING_DIR", settings.keyring_dir)
        self._ship_spans(settings)
        return settings

    def _ship_spans(self, settings: Settings) -> None:
        if not self._spans_exported:
            self._spans_exported = True
            _export_spans(settings)

    def actor(self, given: str | None = None) -> str:
        """Who runs the command, the one rule of every command that records an actor.

        ``--actor`` (``given``), else GOVERNED_MEMORY_ACTOR (the ``actor``
        setting, when it is set), else :func:`login_actor` (``cli:<login>``).
        """
        if given:
            return given
        configured = self.settings().actor
        return configured if configured is not None else login_actor()

    def audit_as(self, actor: str | None, sink: AuditSink | None = None) -> ActorSink:
        """``sink`` (default: the Governance's audit sink) naming the command's actor in every entry."""
        from .._audit import ActorSink

        return ActorSink(sink if sink is not None else self.governance().audit, self.actor(actor))

    def governance(self, settings: Settings | None = None, **kwargs: Any) -> Governance:
        """The Governance every command runs under (policy, consent registry, audit).

        The process's shared one for these settings (the gate a Conversation
        built without ``governance=`` gets under the same settings); a new
        one when ``kwargs`` pass collaborators of their own.
        """
        from .._wiring import Governance, shared_governance

        if kwargs:
            governance = Governance(settings=settings or self.settings(), **kwargs)
            self._closing.append(governance.storage.close)
            return governance
        return shared_governance(settings or self.settings())

    def storage(self, settings: Settings | None = None) -> DeploymentStorage:
        """The deployment's storage for these settings, without building a Governance.

        For the commands that must work with keys missing (``keys status``)
        or that only name the place (``db status``).
        """
        from .._governance import storage_for

        storage = storage_for(settings or self.settings())
        self._closing.append(storage.close)
        return storage

    def close(self) -> None:
        """Close what the command opened through this context (a database pool per storage).

        Called when the command ends (``click.Context.call_on_close``): a pool left
        to the garbage collector keeps its connections open on the server until then.
        """
        closing, self._closing = self._closing, []
        for close in reversed(closing):
            close()

    def file_workspace(self, settings: Settings | None = None) -> Path:
        """The folder the file storage keeps everything in; a database backend is refused.

        Raises:
            ConfigurationError: the deployment stores in a database.
        """
        from .._governance import file_workspace

        return file_workspace(self.storage(settings))

    def demo_governance(self, workspace: Path) -> Governance | None:
        """What ``demo`` runs under: the default mode it shows, whatever policy is configured.

        None (the reference's default mode) when the environment configures no
        policy. When it does, the demo does not apply it (as it does not apply
        ``--policy``), and ``governance=None`` is refused under a configured
        policy, so: a Governance of the built-in default policy over the demo's
        own workspace, which writes the same bytes.
        """
        from .._policy import Policy, Settings
        from .._wiring import Governance

        settings = Settings()
        if settings.policy is None and not settings.policy_overrides():
            return None
        self._ship_spans(settings)
        return Governance(workspace=workspace, policy=Policy(), settings=settings)


def _export_spans(settings: Settings) -> None:
    """Ship the command's spans to the configured OTLP collector, flushed before exit.

    Set up when the command first builds its settings: every span comes from
    a Governance, which needs them, so a command that builds none (``--help``,
    ``demo`` in the default mode) pays nothing. GOVERNED_MEMORY_OTLP_ENDPOINT
    (else OTEL_EXPORTER_OTLP_ENDPOINT) names the collector; without one
    nothing is set up. The provider becomes the process's global one (the CLI
    is the application here), so every Governance the command builds, and the
    ``scheduler run`` daemon's, emits to it; it is shut down, flushing the
    batch, when the command ends, also on an error or SIGTERM.
    """
    if not settings.otlp_endpoint:
        return
    from .._audit import configure_otlp

    provider = configure_otlp(settings, set_global=True)
    ctx = click.get_current_context(silent=True)
    if ctx is not None:
        ctx.find_root().call_on_close(provider.shutdown)
