"""The operator's OIDC settings (``cronwheel server|api --oidc-*``, each with a CRONWHEEL_* variable,
declared on its field: :mod:`cronwheel.settings`).

:meth:`OidcSettings.check` refuses, before any backend is touched, combinations that cannot work:
an issuer without an audience, no keys or two sources of keys, a key URL in plain HTTP to another
machine, no role mapping (no token could be granted anything), a mapping that names no scope.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from cronwheel.auth.identity import Scope
from cronwheel.errors import PermanentError
from cronwheel.settings import API, option

_API = frozenset({API})  # tokens are the API's business

ALL_TEAMS = "*"
"""A team value (after the prefix) that means every team: ``cronwheel:*`` with the prefix ``cronwheel:``."""


@dataclass(frozen=True, slots=True)
class OidcSettings:
    """Which identity provider's JWTs the API accepts, and how their claims map to a caller.

    * ``issuer``: the ``iss`` every token must carry, exactly (None: OIDC off).
    * ``audience``: the ``aud`` every token must contain (the client id the provider gave cronwheel).
    * ``jwks_url`` or ``jwks_file``: the provider's public keys, a JWK Set (``jwks_uri`` of its
      discovery document).
    * ``team_claim``: the claim holding the caller's teams (a string or a list of strings; a dotted
      path reaches into objects: ``realm_access.groups``); only values starting with
      ``team_prefix`` count, the prefix stripped; ``*`` (:data:`ALL_TEAMS`) means every team.
    * ``role_claim``: the claim holding the caller's roles (same shapes); ``roles`` maps a role to
      scopes, as the operator wrote them (``NAME=SCOPE[,SCOPE]``); roles not named are ignored.
    * ``leeway_s``: the clock difference allowed for ``exp``, ``nbf`` and ``iat``.
    * ``refresh_min_s``: the keys are fetched again at most once in this time, whatever arrives;
      ``max_age_s``: keys older than this are fetched again on the next request.
    """

    issuer: str | None = field(
        default=None,
        metadata=option(
            "--oidc-issuer",
            "Accept JWTs of this identity provider (their exact 'iss'). Off when unset.",
            roles=_API,
            metavar="URL",
        ),
    )
    audience: str | None = field(
        default=None,
        metadata=option(
            "--oidc-audience",
            "The 'aud' every token must hold (the client id the provider gave cronwheel).",
            roles=_API,
            metavar="AUD",
        ),
    )
    jwks_url: str | None = field(
        default=None,
        metadata=option(
            "--oidc-jwks-url",
            "The provider's keys (its jwks_uri): https://, or http:// to this machine.",
            roles=_API,
            metavar="URL",
        ),
    )
    jwks_file: str | None = field(
        default=None,
        metadata=option(
            "--oidc-jwks-file",
            "The provider's keys in a JWK Set file (read again when a token names a new key).",
            roles=_API,
            metavar="PATH",
        ),
    )
    team_claim: str = field(
        default="groups",
        metadata=option(
            "--oidc-team-claim",
            "The claim holding the caller's teams (a string or a list; a.b reaches into objects).",
            roles=_API,
            metavar="CLAIM",
        ),
    )
    team_prefix: str = field(
        default="",
        metadata=option(
            "--oidc-team-prefix",
            "Only values starting with this are teams, the prefix removed (cronwheel: makes "
            "cronwheel:billing the team billing); the team * is every team.",
            roles=_API,
            metavar="PREFIX",
        ),
    )
    role_claim: str = field(
        default="roles",
        metadata=option(
            "--oidc-role-claim",
            "The claim holding the caller's roles (a string or a list).",
            roles=_API,
            metavar="CLAIM",
        ),
    )
    roles: tuple[str, ...] = field(
        default=(),
        metadata=option(
            "--oidc-role",
            "Grant a role these scopes (read, write, trigger, admin) on the caller's teams "
            "(repeatable; roles not named grant nothing).",
            roles=_API,
            metavar="ROLE=SCOPE[,SCOPE]",
            multiple=True,
            env="CRONWHEEL_OIDC_ROLES",
        ),
    )
    leeway_s: int = 30
    refresh_min_s: float = 60.0
    max_age_s: float = 3600.0
    fetch_timeout_s: float = 5.0

    @property
    def enabled(self) -> bool:
        return self.issuer is not None

    @property
    def keys_origin(self) -> str:
        return self.jwks_url or self.jwks_file or "nowhere"

    def role_scopes(self) -> dict[str, frozenset[Scope]]:
        """``roles`` parsed: role name -> scopes (a PermanentError naming the bad entry)."""
        mapping: dict[str, frozenset[Scope]] = {}
        for entry in self.roles:
            name, sep, listed = entry.partition("=")
            names = [scope.strip() for scope in listed.split(",") if scope.strip()]
            unknown = sorted(set(names) - {scope.value for scope in Scope})
            if not sep or not name.strip() or not names or unknown:
                raise PermanentError(
                    f"--oidc-role takes ROLE=SCOPE[,SCOPE] with scopes among "
                    f"{', '.join(scope.value for scope in Scope)}, not {entry!r}"
                )
            mapping[name.strip()] = mapping.get(name.strip(), frozenset()) | {Scope(n) for n in names}
        return mapping

    def check(self) -> None:
        """Refuse settings that cannot work (a PermanentError naming the option)."""
        given = (self.audience, self.jwks_url, self.jwks_file, self.roles, self.team_prefix)
        if not self.enabled:
            if any(given):
                raise PermanentError("the --oidc-* options need --oidc-issuer (the iss of the tokens)")
            return
        if not self.issuer or not self.audience:
            raise PermanentError("--oidc-issuer needs --oidc-audience (the client id tokens are issued to)")
        if (self.jwks_url is None) == (self.jwks_file is None):
            raise PermanentError(
                "OIDC needs the provider's keys: --oidc-jwks-url or --oidc-jwks-file, one of them"
            )
        if self.jwks_url is not None:
            _check_url(self.jwks_url)
        if self.jwks_file is not None:
            _check_file(self.jwks_file)
        if not self.team_claim or not self.role_claim:
            raise PermanentError("--oidc-team-claim and --oidc-role-claim must name a claim")
        if not self.role_scopes():
            raise PermanentError(
                "OIDC needs at least one --oidc-role ROLE=SCOPE[,SCOPE]: "
                "without one no token is granted anything"
            )
        if self.leeway_s < 0 or self.refresh_min_s < 0 or self.max_age_s <= 0 or self.fetch_timeout_s <= 0:
            raise PermanentError("OIDC leeway, refresh and timeout must be positive")


def _check_url(url: str) -> None:
    """A key URL in HTTPS, or in HTTP to this machine only (keys read in the clear from another
    machine could be swapped by anyone on the path, who could then sign any token)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    if parts.scheme == "https" and host:
        return
    if parts.scheme == "http" and _loopback(host):
        return
    raise PermanentError(f"--oidc-jwks-url must be https:// (http:// only to this machine), not {url!r}")


def _check_file(path: str) -> None:
    """A key file that can be read and holds a usable key now (the keys are read again later)."""
    from cronwheel.auth.oidc.keys import parse_jwks  # noqa: PLC0415 - keys imports aiohttp and PyJWT

    try:
        document = Path(path).read_bytes()
    except OSError as error:
        raise PermanentError(f"--oidc-jwks-file: cannot read {path}: {error.strerror or error}") from None
    parse_jwks(document, path)


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
