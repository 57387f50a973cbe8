"""OIDC JWTs as API bearers: verified, then mapped to a :class:`~cronwheel.auth.identity.Caller`.

A bearer with the shape of a JWS (three dot-separated parts) is this authenticator's; anything else
is left to the others (the store's tokens never have a dot). A JWT is accepted only when:

* its header's ``alg`` is one of :data:`~cronwheel.auth.oidc.keys.ALGORITHMS` (``none`` and HMAC are
  refused before any key is looked at) and matches the key it names (``kid``);
* its signature verifies with a key of the provider's set (PyJWT, over ``cryptography``; RSA keys
  shorter than 2048 bits refused);
* ``iss`` is the configured issuer, ``aud`` holds the configured audience, ``sub`` is a string;
* ``exp`` (required), ``nbf`` and ``iat`` hold at the injected clock's now, give or take
  ``leeway_s`` (PyJWT reads the machine's clock, so its own time checks are off and done here).

Every failure is a 401 (:class:`~cronwheel.errors.UnauthenticatedError`) saying which check failed.
A verified token whose claims give no team, or no role the operator mapped to scopes, is a 403
(:class:`~cronwheel.errors.ForbiddenError`): the provider vouched for the caller, who simply has
nothing here, and no other credential in the same token would change that.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import jwt
from jwt import PyJWK, PyJWTError

from cronwheel.auth.identity import Caller, CallerKind, Scope
from cronwheel.auth.oidc.keys import ALGORITHMS, FileSource, Keys, Source, UrlSource
from cronwheel.auth.oidc.settings import ALL_TEAMS, OidcSettings
from cronwheel.clock import Clock
from cronwheel.errors import ForbiddenError, UnauthenticatedError

TEAM_NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")  # as the API's team names
NAME_CLAIMS = ("preferred_username", "email", "name")  # the caller's name for the audit log, else sub
REQUIRED = ["exp", "iss", "aud", "sub"]


def is_jwt(credential: str) -> bool:
    """Whether ``credential`` has the shape of a compact JWS (``header.payload.signature``)."""
    return credential.count(".") == 2


@dataclass(frozen=True, slots=True)
class ClaimMapping:
    """How a verified token's claims become a caller's teams and scopes (see OidcSettings)."""

    team_claim: str
    team_prefix: str
    role_claim: str
    roles: Mapping[str, frozenset[Scope]]

    @classmethod
    def of(cls, settings: OidcSettings) -> ClaimMapping:
        return cls(settings.team_claim, settings.team_prefix, settings.role_claim, settings.role_scopes())

    def caller(self, claims: Mapping[str, Any]) -> Caller:
        """The caller ``claims`` describe; ForbiddenError when they give no team or no scope."""
        teams = self.teams(claims)
        scopes = frozenset().union(
            *(self.roles.get(role, frozenset()) for role in values(claims, self.role_claim))
        )
        if teams is not None and not teams:
            where = f" starting with {self.team_prefix!r}" if self.team_prefix else ""
            raise ForbiddenError(
                f"this OIDC token names no cronwheel team (claim {self.team_claim!r}{where})"
            )
        if not scopes:
            raise ForbiddenError(
                f"this OIDC token holds no role this server grants scopes to (claim {self.role_claim!r}; "
                f"roles: {', '.join(sorted(self.roles))})"
            )
        subject = str(claims["sub"])
        name = next((claims[key] for key in NAME_CLAIMS if isinstance(claims.get(key), str)), subject)
        return Caller(CallerKind.OIDC, subject, name, scopes, teams)

    def teams(self, claims: Mapping[str, Any]) -> frozenset[str] | None:
        """The teams of the team claim (None: every team)."""
        found = set()
        for value in values(claims, self.team_claim):
            if not value.startswith(self.team_prefix):
                continue
            team = value[len(self.team_prefix) :]
            if team == ALL_TEAMS:
                return None
            if TEAM_NAME.fullmatch(team):
                found.add(team)
        return frozenset(found)


def values(claims: Mapping[str, Any], path: str) -> list[str]:
    """The strings of claim ``path``: a top-level claim of that name (URL-like names have dots),
    else a dotted path into objects (``realm_access.roles``); a string is one value, a list its
    strings, anything else none."""
    value: Any = claims.get(path)
    if path not in claims:
        value = claims
        for part in path.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str)]
    return []


class OidcAuthenticator:
    """An :class:`~cronwheel.api.callers.access.Authenticator` of one identity provider's JWTs."""

    def __init__(self, settings: OidcSettings, keys: Keys, clock: Clock) -> None:
        assert settings.issuer is not None
        assert settings.audience is not None
        self.issuer = settings.issuer
        self.audience = settings.audience
        self.leeway = timedelta(seconds=settings.leeway_s)
        self.mapping = ClaimMapping.of(settings)
        self.keys = keys
        self.clock = clock

    @classmethod
    def of(cls, settings: OidcSettings, clock: Clock) -> OidcAuthenticator:
        """The authenticator ``settings`` describe (checked: :meth:`OidcSettings.check`)."""
        source: Source = (
            UrlSource(settings.jwks_url, settings.fetch_timeout_s)
            if settings.jwks_url is not None
            else FileSource(settings.keys_origin)
        )
        keys = Keys(source, clock, refresh_min_s=settings.refresh_min_s, max_age_s=settings.max_age_s)
        return cls(settings, keys, clock)

    async def authenticate(self, credential: str) -> Caller | None:
        if not is_jwt(credential):
            return None
        try:
            header = jwt.get_unverified_header(credential)
        except PyJWTError:
            raise UnauthenticatedError("malformed JWT") from None
        alg, kid = header.get("alg"), header.get("kid")
        if not isinstance(alg, str) or alg not in ALGORITHMS:
            raise UnauthenticatedError(
                f"JWT algorithm {alg!r} is not accepted (only {', '.join(sorted(ALGORITHMS))})"
            )
        keys = await self.keys.candidates(kid if isinstance(kid, str) else None, alg)
        if not keys:
            raise UnauthenticatedError(
                f"JWT signed with a key the identity provider does not publish (kid {kid!r}, {alg})"
            )
        claims = self._verified(credential, alg, keys)
        self._check_times(claims)
        return self.mapping.caller(claims)

    def _verified(self, credential: str, alg: str, keys: list[PyJWK]) -> dict[str, Any]:
        """The claims of ``credential``, whose signature one of ``keys`` verifies."""
        for key in keys:
            try:
                claims: dict[str, Any] = jwt.decode(
                    credential,
                    key,
                    algorithms=[alg],
                    audience=self.audience,
                    issuer=self.issuer,
                    options={
                        "require": REQUIRED,
                        "verify_exp": False,  # by the injected clock: _check_times
                        "verify_nbf": False,
                        "verify_iat": False,
                        "enforce_minimum_key_length": True,
                    },
                )
            except jwt.InvalidSignatureError:
                continue
            except PyJWTError as error:
                raise UnauthenticatedError(self._reason(error)) from None
            return claims
        raise UnauthenticatedError("JWT signature does not verify with the identity provider's keys")

    def _check_times(self, claims: Mapping[str, Any]) -> None:
        now = self.clock.now()
        exp, nbf, iat = (_instant(claims, name) for name in ("exp", "nbf", "iat"))
        if exp is None:
            raise UnauthenticatedError("JWT 'exp' is not a number")
        if now >= exp + self.leeway:
            raise UnauthenticatedError(f"JWT expired at {exp.isoformat()}")
        if nbf is not None and nbf > now + self.leeway:
            raise UnauthenticatedError(f"JWT not valid before {nbf.isoformat()}")
        if iat is not None and iat > now + self.leeway:
            raise UnauthenticatedError(f"JWT issued in the future ({iat.isoformat()})")

    def _reason(self, error: PyJWTError) -> str:
        return _reason(error, self.issuer, self.audience)

    async def close(self) -> None:
        await self.keys.close()


def _instant(claims: Mapping[str, Any], name: str) -> datetime | None:
    """A NumericDate claim as an instant (None when absent); a claim that is not a number is a 401."""
    value = claims.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UnauthenticatedError(f"JWT {name!r} is not a number")
    try:
        return datetime.fromtimestamp(value, UTC)
    except (OverflowError, OSError, ValueError):
        raise UnauthenticatedError(f"JWT {name!r} is out of range") from None


def _reason(error: PyJWTError, issuer: str, audience: str) -> str:
    """What a PyJWT refusal means, for the 401's detail (the expected issuer and audience are no
    secret: the provider's discovery document and every valid token show them)."""
    if isinstance(error, jwt.InvalidIssuerError):
        return f"JWT issuer is not this server's identity provider ({issuer})"
    if isinstance(error, jwt.InvalidAudienceError):
        return f"JWT audience is not this server ({audience})"
    if isinstance(error, jwt.MissingRequiredClaimError):
        return f"JWT lacks the {error.claim!r} claim"
    if isinstance(error, jwt.InvalidKeyError):
        return f"JWT key refused: {error}"
    if isinstance(error, jwt.InvalidAlgorithmError):
        return "JWT algorithm does not match the key"
    return "malformed JWT"
