"""OpenID Connect sign-in: authlib's Starlette client, authorization code flow with PKCE.

:class:`OidcLogin` wraps one registered authlib client. :meth:`~OidcLogin.begin`
redirects to the provider with a fresh ``state``, ``nonce`` and S256
``code_challenge`` (authlib makes and stores them in the sign-in flow's
server-side record); :meth:`~OidcLogin.finish` takes the callback, checks the
``state``, exchanges the code with the ``code_verifier`` and has authlib verify
the ID token: its signature against the issuer's JWKS, ``iss``, ``aud``
(the client id), ``exp`` / ``iat`` and the ``nonce``. The user's groups (the
``group_claim`` of the ID token, else of the userinfo answer) then give the
role through ``role_map``; a user in no allowed group is refused.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from authlib.integrations.starlette_client import (  # type: ignore[import-untyped]
    OAuth,
    OAuthError,
)

from .._principal import Principal, Role

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

    from .._config import OidcConfig

__all__ = ["OidcLogin", "OidcRefusal"]


class OidcRefusal(Exception):
    """The provider's answer was refused: ``status`` for the page, ``reason_code`` for the audit.

    ``who`` names the user when the token was valid but the groups were not.
    """

    def __init__(self, message: str, *, status: int, reason_code: str, who: str | None) -> None:
        super().__init__(message)
        self.message = message
        self.status = status
        self.reason_code = reason_code
        self.who = who


@dataclass(frozen=True)
class _Identity:
    name: str
    groups: tuple[str, ...]


class OidcLogin:
    """Sign-in through one OpenID provider.

    Args:
        config: the ``[oidc]`` settings.
        role_map: group -> role; the first group of the map the user has decides.
    """

    def __init__(self, config: OidcConfig, role_map: dict[str, Role]) -> None:
        self.config = config
        self.role_map = dict(role_map)
        self.source = f"oidc:{config.issuer}"
        oauth = OAuth()
        self._client: Any = oauth.register(
            name="console",
            client_id=config.client_id,
            client_secret=config.client_secret.get_secret_value(),
            server_metadata_url=f"{config.issuer}/.well-known/openid-configuration",
            client_kwargs={"scope": config.scope, "code_challenge_method": "S256"},
        )

    async def begin(self, request: Request, redirect_uri: str) -> Response:
        """The redirect to the provider's authorization endpoint (state, nonce, PKCE stored)."""
        try:
            response: Response = await self._client.authorize_redirect(request, redirect_uri)
        except Exception as exc:  # network, bad metadata: the provider is unusable
            raise OidcRefusal(
                f"the identity provider {self.config.issuer} could not be reached or its "
                f"configuration is unusable ({type(exc).__name__}: {exc}); check oidc.issuer "
                "and that the provider is up",
                status=502,
                reason_code="provider_unreachable",
                who=None,
            ) from exc
        return response

    async def finish(self, request: Request) -> Principal:
        """Verify the callback and map the user to a role.

        Raises:
            OidcRefusal: the state, code or ID token was refused, or the user is in no
                allowed group.
        """
        identity = await self._identity(request)
        allowed = set(self.config.allowed_groups)
        if allowed and not allowed.intersection(identity.groups):
            raise OidcRefusal(
                f"{identity.name} is in none of the groups allowed to use the console "
                f"({', '.join(sorted(allowed))}); ask your identity administrator to add you "
                "to one of them",
                status=403,
                reason_code="no_allowed_group",
                who=identity.name,
            )
        for group, role in self.role_map.items():
            if group in identity.groups and (not allowed or group in allowed):
                return Principal(name=identity.name, role=role, source=self.source)
        mapped = ", ".join(sorted(self.role_map)) or "none configured"
        raise OidcRefusal(
            f"{identity.name} is in no group that has a console role (groups with a role: "
            f"{mapped}); ask your administrator to add you to one, or to map your group in "
            "role_map",
            status=403,
            reason_code="no_role",
            who=identity.name,
        )

    async def _identity(self, request: Request) -> _Identity:
        claims_options = {
            "iss": {"essential": True, "value": self.config.issuer},
            "aud": {"essential": True, "value": self.config.client_id},
            "exp": {"essential": True},
            "iat": {"essential": True},
            "sub": {"essential": True},
        }
        try:
            token = await self._client.authorize_access_token(
                request, claims_options=claims_options
            )
        except OAuthError as exc:
            raise OidcRefusal(
                f"the identity provider's answer was refused ({exc.error}: "
                f"{exc.description or 'no description'}); start again from /login",
                status=400,
                reason_code="oauth_error",
                who=None,
            ) from exc
        except Exception as exc:  # authlib's JOSE errors have no common root worth naming
            raise OidcRefusal(
                f"the identity provider's ID token was refused ({type(exc).__name__}: {exc}); "
                "start again from /login, and if it persists check the provider's keys and "
                "oidc.client_id",
                status=400,
                reason_code="bad_id_token",
                who=None,
            ) from exc
        claims = token.get("userinfo")
        if not claims:
            raise OidcRefusal(
                "the identity provider answered without an ID token; make sure the client is "
                "allowed the 'openid' scope",
                status=400,
                reason_code="no_id_token",
                who=None,
            )
        claims = dict(claims)
        if self.config.group_claim not in claims:
            try:
                extra = await self._client.userinfo(token=token)
            except Exception as exc:
                raise OidcRefusal(
                    f"the identity provider's userinfo endpoint failed ({exc}); try again",
                    status=502,
                    reason_code="userinfo_failed",
                    who=None,
                ) from exc
            if extra.get("sub") == claims.get("sub"):
                claims.setdefault(self.config.group_claim, extra.get(self.config.group_claim))
        name = str(claims.get("preferred_username") or claims.get("email") or claims["sub"])
        raw = claims.get(self.config.group_claim) or []
        groups = (raw,) if isinstance(raw, str) else tuple(str(g) for g in raw)
        return _Identity(name=name, groups=groups)
