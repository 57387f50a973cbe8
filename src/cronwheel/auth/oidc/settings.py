"""The operator's OIDC settings (``cronwheel server|api --oidc-*``, each with a CRONWHEEL_* variable).

:meth:`OidcSettings.check` refuses, before any backend is touched, combinations that cannot work:
an issuer without an audience, no keys or two sources of keys, a key URL in plain HTTP to another
machine, no role mapping (no token could be granted anything), a mapping that names no scope.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from cronwheel.auth.identity import Scope
from cronwheel.errors import PermanentError

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

    issuer: str | None = None
    audience: str | None = None
    jwks_url: str | None = None
    jwks_file: str | None = None
    team_claim: str = "groups"
    team_prefix: str = ""
    role_claim: str = "roles"
    roles: tuple[str, ...] = ()
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
