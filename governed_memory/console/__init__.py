"""governed_memory.console: the privacy office's console in the browser (issue 17).

Installed with the ``console`` extra (``pip install 'governed-memory[console]'``)
and served by ``governed-memory console`` (docs/console.md). Its public names:

* :func:`create_app` -- the Starlette app over one ``governed_memory.Governance``;
* :class:`ConsoleConfig` / :func:`load_console_config` -- its settings;
* :class:`Role`, :class:`Principal` -- who is signed in;
* :func:`add_user`, :func:`remove_user`, :func:`set_role`, :func:`set_password`
  -- the local accounts file.
"""

from ._app import create_app
from ._auth import add_user, remove_user, set_password, set_role
from ._config import ConsoleConfig, load_console_config
from ._principal import Principal, Role

__all__ = [
    "ConsoleConfig",
    "Principal",
    "Role",
    "add_user",
    "create_app",
    "load_console_config",
    "remove_user",
    "set_password",
    "set_role",
]
