"""The console's settings: :class:`ConsoleConfig`, from a TOML file and the environment.

Sources, highest first: constructor arguments, ``GOVERNED_MEMORY_CONSOLE_*``
variables (nested with ``__``: ``GOVERNED_MEMORY_CONSOLE_OIDC__ISSUER``), then
the TOML file named by ``config_file`` (``--config FILE``). docs/console-auth.md
lists every key.
"""

from __future__ import annotations

import datetime as _dt
import re
import tomllib
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel as _Model
from pydantic import (
    BeforeValidator,
    ConfigDict,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import (
    BaseSettings,
    InitSettingsSource,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
)

import governed_memory as gm

from ._principal import Role

__all__ = ["ConsoleConfig", "LoginRate", "OidcConfig", "PasswordHashing", "load_console_config"]

ENV_PREFIX = "GOVERNED_MEMORY_CONSOLE_"
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
_DURATION = re.compile(r"^\s*(?:(\d{1,6})\s*([smhd])\s*)+$")
_DURATION_PART = re.compile(r"(\d{1,6})\s*([smhd])")


def _duration(value: Any) -> Any:
    """``15m``, ``8h``, ``1h30m``, a number of seconds or a timedelta, as a timedelta."""
    if isinstance(value, _dt.timedelta) or value is None:
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return _dt.timedelta(seconds=value)
    if isinstance(value, str) and _DURATION.match(value):
        return _dt.timedelta(
            seconds=sum(int(n) * _UNITS[u] for n, u in _DURATION_PART.findall(value))
        )
    raise ValueError(
        f"{value!r} is not a duration; write <number><unit> with units s, m, h, d "
        "(e.g. '15m', '8h', '1h30m')"
    )


Duration = Annotated[_dt.timedelta, BeforeValidator(_duration)]


class LoginRate(_Model):
    """At most ``attempts`` failed-or-not login attempts per ``window``, per user and per IP."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    attempts: int = Field(default=5, ge=1, le=10_000)
    window: Duration = _dt.timedelta(minutes=1)

    @model_validator(mode="before")
    @classmethod
    def _from_text(cls, value: Any) -> Any:
        # "5/minute", "10/5m", "20 per hour": the natural spellings of a rate.
        if not isinstance(value, str):
            return value
        match = re.fullmatch(r"\s*(\d{1,5})\s*(?:/|per)\s*(\w+)\s*", value)
        names = {"second": "1s", "minute": "1m", "hour": "1h", "day": "1d"}
        if match is None:
            raise ValueError(
                f"login_rate {value!r} is not a rate; write '<attempts>/<window>', "
                "e.g. '5/minute' or '10/15m'"
            )
        window = match.group(2)
        return {"attempts": int(match.group(1)), "window": names.get(window, window)}


class PasswordHashing(_Model):
    """The Argon2id cost of a local password hash (each sign-in verifies one).

    The default is argon2-cffi's (RFC 9106's low-memory profile: 3 passes over
    64 MiB, 4 lanes, about 0.15 s on one core of a 2026 server). The floor is
    OWASP's minimum for Argon2id (2 passes over 19 MiB, 1 lane): a host short of
    memory may go down to it, never below. A hash made under other parameters
    still verifies, and is replaced under these at its user's next sign-in.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    time_cost: int = Field(default=3, ge=2, le=100)
    memory_kib: int = Field(default=65536, ge=19456, le=4_194_304)
    parallelism: int = Field(default=4, ge=1, le=64)

    def hasher(self) -> Any:
        """An ``argon2.PasswordHasher`` with these parameters."""
        import argon2

        return argon2.PasswordHasher(
            time_cost=self.time_cost, memory_cost=self.memory_kib, parallelism=self.parallelism
        )


class OidcConfig(_Model):
    """OpenID Connect sign-in (absent: local accounts only).

    Args:
        issuer: the provider's issuer URL; ``<issuer>/.well-known/openid-configuration``
            is read on the first sign-in.
        client_id, client_secret: the console's client at the provider.
        allowed_groups: groups whose members may sign in (empty: any group in ``role_map``).
        group_claim: the ID-token/userinfo claim listing the user's groups.
        redirect_uri: the callback URL registered at the provider (default: this
            server's ``/auth/callback`` as the request reached it; set it behind a proxy).
        scope: the scopes asked for.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    issuer: str = Field(min_length=1)
    client_id: str = Field(min_length=1)
    client_secret: SecretStr
    allowed_groups: tuple[str, ...] = ()
    group_claim: str = "groups"
    redirect_uri: str | None = None
    scope: str = "openid profile email"

    @field_validator("issuer")
    @classmethod
    def _issuer_is_https(cls, value: str) -> str:
        local = re.match(r"^http://(127\.0\.0\.1|localhost|\[::1\])(:\d+)?(/|$)", value)
        if not value.startswith("https://") and local is None:
            raise ValueError(
                f"oidc.issuer {value!r} is not an https URL; the provider's keys and tokens "
                "must come over TLS (plain http is accepted only for 127.0.0.1)"
            )
        return value.rstrip("/")


class ConsoleConfig(BaseSettings):
    """How the console serves and whom it lets in (frozen, validated at construction).

    Args:
        host, port: where it listens (default 127.0.0.1:8765; a public bind needs TLS
            or ``behind_proxy``).
        tls_cert, tls_key: PEM files for HTTPS served by uvicorn itself.
        behind_proxy: a TLS-terminating reverse proxy forwards to it; with
            ``forwarded_allow_ips`` uvicorn trusts that proxy's X-Forwarded-* headers.
        forwarded_allow_ips: the proxy addresses whose X-Forwarded-For is believed.
        accounts_file: the local accounts (argon2 hashes; mode 0600, owned by the
            service user). None: no local sign-in.
        secret_key_file: 32+ random bytes keying the CSRF tokens (None: a random key
            per start, which also ends every session at a restart).
        session_idle: a session unused this long ends (default 15m).
        session_max: a session ends this long after sign-in however used (default 8h).
        login_rate: login attempts allowed per user name and per client IP.
        password_hashing: the Argon2id cost of local password hashes, see
            :class:`PasswordHashing`.
        oidc: OpenID Connect sign-in, see :class:`OidcConfig`.
        role_map: OIDC group -> console role.
    """

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        env_nested_delimiter="__",
        extra="forbid",
        frozen=True,
        hide_input_in_errors=True,
    )

    config_file: Path | None = None
    host: str = "127.0.0.1"
    port: int = Field(default=8765, ge=0, le=65535)
    tls_cert: Path | None = None
    tls_key: Path | None = None
    behind_proxy: bool = False
    forwarded_allow_ips: tuple[str, ...] = ()
    accounts_file: Path | None = None
    secret_key_file: Path | None = None
    session_idle: Duration = _dt.timedelta(minutes=15)
    session_max: Duration = _dt.timedelta(hours=8)
    login_rate: LoginRate = LoginRate()
    password_hashing: PasswordHashing = PasswordHashing()
    oidc: OidcConfig | None = None
    role_map: dict[str, Role] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> ConsoleConfig:
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ValueError("tls_cert and tls_key go together; set both (PEM files) or neither")
        if not self.session_idle or self.session_idle > self.session_max:
            raise ValueError(
                f"session_idle ({self.session_idle}) must be above 0 and at most session_max "
                f"({self.session_max}); shorten session_idle or lengthen session_max"
            )
        if self.oidc is None and self.accounts_file is None:
            raise ValueError(
                "no way to sign in is configured; set accounts_file (local accounts, "
                "`governed-memory console add-user`) or the [oidc] table"
            )
        loopback = self.host in {"127.0.0.1", "localhost", "::1"}
        if not loopback and self.tls_cert is None and not self.behind_proxy:
            raise ValueError(
                f"host {self.host!r} is not a loopback address and no TLS is configured; set "
                "tls_cert and tls_key, or behind_proxy = true when a TLS proxy fronts it"
            )
        return self

    @property
    def tls(self) -> bool:
        """Whether uvicorn serves HTTPS itself."""
        return self.tls_cert is not None

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        return (init_settings, env_settings, _TomlFile(settings_cls, init_settings, env_settings))


class _TomlFile(PydanticBaseSettingsSource):
    """The TOML file named by ``config_file`` (an argument, else the environment)."""

    def __init__(
        self,
        settings_cls: type[BaseSettings],
        init: PydanticBaseSettingsSource,
        env: PydanticBaseSettingsSource,
    ) -> None:
        super().__init__(settings_cls)
        self._init, self._env = init, env

    def get_field_value(self, field: Any, field_name: str) -> tuple[Any, str, bool]:
        return None, field_name, False

    def __call__(self) -> dict[str, Any]:
        given = self._init.init_kwargs if isinstance(self._init, InitSettingsSource) else {}
        path = given.get("config_file") or self._env().get("config_file")
        if path is None:
            return {}
        path = Path(path)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError as exc:
            raise gm.ConfigurationError(
                f"console config file {path} does not exist; pass an existing file to --config"
            ) from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise gm.ConfigurationError(
                f"console config file {path} cannot be read: {exc}; check its permissions"
            ) from exc
        except tomllib.TOMLDecodeError as exc:
            raise gm.ConfigurationError(
                f"console config file {path} is not valid TOML: {exc}; fix the line named"
            ) from exc
        data.pop("config_file", None)
        return data


def load_console_config(config_file: Path | None = None, **overrides: Any) -> ConsoleConfig:
    """Build the console's settings, translating a validation error into one clear line.

    Raises:
        ConfigurationError: a value breaks a rule (the message names it and the fix).
    """
    try:
        return ConsoleConfig(config_file=config_file, **overrides)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "console config"
        message = first["msg"].removeprefix("Value error, ")
        raise gm.ConfigurationError(f"console setting {where}: {message}") from exc
