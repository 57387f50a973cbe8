"""The OIDC authenticator (cronwheel.auth.oidc) on its own: keys made here, a JWK Set in a file, a
manual clock. Each refusal is checked for its reason, so that a check that stopped running (and a
token that then passed for another reason) would fail the test."""

from __future__ import annotations

import asyncio
import json
import logging
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from cronwheel.auth.identity import CallerKind, Scope
from cronwheel.auth.oidc import FileSource, Keys, OidcAuthenticator, OidcSettings
from cronwheel.auth.oidc.keys import JwksError, parse_jwks
from cronwheel.clock import ManualClock
from cronwheel.errors import BackendUnavailableError, ForbiddenError, UnauthenticatedError

from .provider import (
    AUDIENCE,
    ISSUER,
    Provider,
    SigningKey,
    claims,
    ec_key,
    ed_key,
    forged,
    rsa_key,
    sign,
)

START = datetime(2026, 3, 2, 12, 0, 0, tzinfo=UTC)
RSA, EC, ED = rsa_key(), ec_key(), ed_key()
ROTATED = rsa_key("rsa-2")
STRANGER = rsa_key("rsa-1")  # the published key's id, another key: a forger's
SETTINGS = OidcSettings(
    issuer=ISSUER,
    audience=AUDIENCE,
    jwks_file="set by the fixture",
    team_prefix="cronwheel:",
    roles=("cronwheel-reader=read", "cronwheel-writer=read,write,trigger", "cronwheel-admin=admin"),
)


class Idp:
    """A provider publishing a JWK Set file, and an authenticator of its tokens."""

    def __init__(self, tmp_path: Path, settings: OidcSettings = SETTINGS) -> None:
        self.clock = ManualClock(START)
        self.provider = Provider([RSA, EC, ED])
        self.file = self.provider.write(tmp_path / "jwks.json")
        self.keys = Keys(FileSource(str(self.file)), self.clock, refresh_min_s=60, max_age_s=3600)
        self.authenticator = OidcAuthenticator(settings, self.keys, self.clock)

    def publish(self, *keys: SigningKey) -> None:
        self.provider.published = list(keys)
        self.provider.write(self.file)

    def token(self, key: SigningKey = RSA, **changes: Any) -> str:
        return sign(key, claims(self.clock.now(), **changes))

    async def refused(self, token: str) -> str:
        with pytest.raises(UnauthenticatedError) as refusal:
            await self.authenticator.authenticate(token)
        return str(refusal.value)


@pytest.fixture
def idp(tmp_path: Path) -> Idp:
    return Idp(tmp_path)


@pytest.mark.parametrize("key", [RSA, EC, ED], ids=["RS256", "ES256", "EdDSA"])
async def test_a_valid_token_is_a_caller_of_its_teams_with_its_roles_scopes(
    idp: Idp, key: SigningKey
) -> None:
    caller = await idp.authenticator.authenticate(idp.token(key))
    assert caller is not None
    assert (caller.kind, caller.id, caller.name) == (CallerKind.OIDC, "f3a9-alice", "alice")
    assert caller.teams == frozenset({"data"})  # "staff" has not the prefix
    assert caller.scopes == frozenset({Scope.READ})


async def test_other_credentials_are_left_to_the_other_authenticators(idp: Idp) -> None:
    assert await idp.authenticator.authenticate("cw_0123456789ab_" + "a" * 43) is None
    assert await idp.authenticator.authenticate("not-a-token") is None
    assert idp.keys.fetches == 0  # nothing was looked up for them


async def test_expired_tokens_are_refused_after_the_leeway(idp: Idp) -> None:
    token = idp.token()  # exp: START + 300 s
    idp.clock.advance(300 + 29)
    assert await idp.authenticator.authenticate(token) is not None  # within the 30 s leeway
    idp.clock.advance(1)
    assert "JWT expired at 2026-03-02T12:05:00+00:00" in await idp.refused(token)


async def test_tokens_not_yet_valid_or_issued_in_the_future_are_refused(idp: Idp) -> None:
    later = int(START.timestamp()) + 120
    assert "not valid before" in await idp.refused(idp.token(nbf=later))
    assert "issued in the future" in await idp.refused(idp.token(iat=later, nbf=None))
    assert await idp.authenticator.authenticate(idp.token(nbf=int(START.timestamp()) + 20)) is not None


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"iss": "https://evil.example.com/realms/acme"}, "issuer is not this server's identity provider"),
        ({"aud": "another-app"}, "audience is not this server"),
        ({"aud": None}, "lacks the 'aud' claim"),
        ({"exp": None}, "lacks the 'exp' claim"),
        ({"sub": None}, "lacks the 'sub' claim"),
        ({"iss": None}, "lacks the 'iss' claim"),
        ({"exp": "tomorrow"}, "'exp' is not a number"),
    ],
    ids=["wrong issuer", "wrong audience", "no audience", "no exp", "no sub", "no iss", "exp not a number"],
)
async def test_claims_that_do_not_hold_are_refused(idp: Idp, changes: dict[str, Any], reason: str) -> None:
    assert reason in await idp.refused(idp.token(**changes))


async def test_a_token_signed_by_another_key_with_a_published_kid_is_refused(idp: Idp) -> None:
    assert "signature does not verify" in await idp.refused(idp.token(STRANGER))


async def test_alg_none_is_refused_before_any_key_is_looked_at(idp: Idp) -> None:
    token = forged({"alg": "none", "kid": RSA.kid, "typ": "JWT"}, claims(START, roles=["cronwheel-admin"]))
    assert "algorithm 'none' is not accepted" in await idp.refused(token)
    assert idp.keys.fetches == 0


@pytest.mark.parametrize("secret", ["pem", "jwk n"])
async def test_hmac_signed_with_the_public_key_is_refused(idp: Idp, secret: str) -> None:
    """Algorithm confusion: an HS256 token whose HMAC key is the provider's public key, which a
    verifier that took the header's alg at its word would accept."""
    material = RSA.public_pem() if secret == "pem" else str(RSA.jwk()["n"]).encode()
    token = forged({"alg": "HS256", "kid": RSA.kid}, claims(START, roles=["cronwheel-admin"]), material)
    assert "algorithm 'HS256' is not accepted" in await idp.refused(token)


async def test_a_token_whose_alg_is_not_its_keys_is_refused(idp: Idp) -> None:
    """An RS384 token naming the key published for RS256: no key of that kid and alg."""
    token = sign(SigningKey(RSA.kid, "RS384", RSA.private), claims(START))
    assert "does not publish" in await idp.refused(token)


@pytest.mark.parametrize(
    ("token", "reason"),
    [
        ("a.b.c", "malformed JWT"),
        ("e30.e30.", "algorithm None is not accepted"),  # {} as header: no alg
        ("eyJhbGciOiJSUzI1NiJ9.e30.!!!", "malformed JWT"),  # {"alg":"RS256"}, a signature not base64
        ("eyJhbGciOiJSUzI1NiJ9..", "signature does not verify"),  # no payload, no signature
    ],
)
async def test_malformed_tokens_are_refused(idp: Idp, token: str, reason: str) -> None:
    assert reason in await idp.refused(token)


async def test_an_unknown_kid_fetches_the_keys_again_at_most_once_a_minute(idp: Idp) -> None:
    assert await idp.authenticator.authenticate(idp.token()) is not None
    assert idp.keys.fetches == 1
    idp.publish(RSA, ROTATED)  # the provider rotates: a new key, not yet fetched
    idp.clock.advance(61)
    rotated = await idp.authenticator.authenticate(idp.token(ROTATED))
    assert rotated is not None
    assert idp.keys.fetches == 2  # the unknown kid fetched the set again, and was found in it

    bogus = SigningKey("bogus", "RS256", STRANGER.private)
    for n in range(50):  # a flood of made-up key ids: no fetch before a minute has passed
        forger = SigningKey(f"bogus-{n}", "RS256", bogus.private)
        assert "does not publish" in await idp.refused(idp.token(forger))
        idp.clock.advance(1)
    assert idp.keys.fetches == 2
    idp.clock.advance(10)
    assert "does not publish" in await idp.refused(idp.token(bogus))
    assert idp.keys.fetches == 3  # a minute after the last fetch, the next unknown kid fetches again


async def test_keys_are_kept_when_the_provider_cannot_be_read(
    idp: Idp, caplog: pytest.LogCaptureFixture
) -> None:
    assert await idp.authenticator.authenticate(idp.token()) is not None
    idp.file.write_text("<html>503 Service Unavailable</html>")
    idp.clock.advance(7200)  # older than max_age: fetched again, which fails
    with caplog.at_level(logging.WARNING, logger="cronwheel.oidc"):
        assert await idp.authenticator.authenticate(idp.token()) is not None
    assert idp.keys.fetches == 2
    assert "OIDC keys not refreshed" in caplog.text


async def test_without_any_keys_the_answer_is_unavailable_not_unauthenticated(idp: Idp) -> None:
    idp.file.unlink()
    with pytest.raises(BackendUnavailableError, match="could not be read"):
        await idp.authenticator.authenticate(idp.token())


@pytest.mark.filterwarnings("ignore::jwt.warnings.InsecureKeyLengthWarning")  # signing with it, here
async def test_rsa_keys_shorter_than_2048_bits_are_refused(idp: Idp) -> None:
    weak = rsa_key("weak", bits=1024)
    idp.publish(RSA, weak)
    assert "key refused" in await idp.refused(idp.token(weak))


async def test_a_token_with_no_team_or_no_mapped_role_is_forbidden(idp: Idp) -> None:
    with pytest.raises(ForbiddenError, match="names no cronwheel team \\(claim 'groups' starting with"):
        await idp.authenticator.authenticate(idp.token(groups=["staff", "cronwheel:"]))
    with pytest.raises(ForbiddenError, match="no role this server grants scopes to"):
        await idp.authenticator.authenticate(idp.token(roles=["offline_access"]))
    with pytest.raises(ForbiddenError, match="names no cronwheel team"):
        await idp.authenticator.authenticate(idp.token(groups=None))


async def test_roles_add_up_and_a_star_team_is_every_team(idp: Idp) -> None:
    caller = await idp.authenticator.authenticate(
        idp.token(groups="cronwheel:*", roles=["cronwheel-reader", "cronwheel-writer", "other"])
    )
    assert caller is not None
    assert caller.teams is None
    assert caller.scopes == {Scope.READ, Scope.WRITE, Scope.TRIGGER}
    several = await idp.authenticator.authenticate(
        idp.token(groups=["cronwheel:data", "cronwheel:billing", "cronwheel:bad name", 7])
    )
    assert several is not None
    assert several.teams == frozenset({"data", "billing"})


async def test_claims_are_found_by_name_or_by_dotted_path(tmp_path: Path) -> None:
    """Keycloak nests roles (realm_access.roles); Auth0 names claims with URLs, dots included."""
    settings = OidcSettings(
        issuer=ISSUER,
        audience=AUDIENCE,
        jwks_file="-",
        team_claim="https://cronwheel.example.com/teams",
        role_claim="realm_access.roles",
        roles=("ops=admin",),
    )
    idp = Idp(tmp_path, settings)
    layout: dict[str, Any] = {
        "https://cronwheel.example.com/teams": "billing",
        "realm_access": {"roles": ["ops"]},
    }
    caller = await idp.authenticator.authenticate(idp.token(**layout))
    assert caller is not None
    assert (caller.teams, caller.scopes) == (frozenset({"billing"}), frozenset({Scope.ADMIN}))


def test_only_asymmetric_signing_keys_are_kept_from_a_set() -> None:
    jwks = {
        "keys": [
            {"kty": "oct", "k": "c2VjcmV0", "kid": "hmac"},
            {**EC.jwk(), "use": "enc", "kid": "for-encryption"},
            {"kty": "RSA", "kid": "broken", "n": "AQAB"},
            RSA.jwk(),
        ]
    }
    assert [key.key_id for key in parse_jwks(json.dumps(jwks), "test").keys] == [RSA.kid]
    with pytest.raises(JwksError, match="no usable signing key"):
        parse_jwks(json.dumps({"keys": jwks["keys"][:3]}), "test")
    with pytest.raises(JwksError, match="not a JWK Set"):
        parse_jwks("[]", "test")
    with pytest.raises(JwksError, match="not JSON"):
        parse_jwks("{", "test")


class SlowProvider:
    """A key source whose fetches after the first hang until released (a provider that stalls)."""

    origin = "slow provider"

    def __init__(self, document: bytes) -> None:
        self.document = document
        self.fetches = 0
        self.release = asyncio.Event()

    async def fetch(self) -> bytes:
        self.fetches += 1
        if self.fetches > 1:
            await self.release.wait()
        return self.document

    async def close(self) -> None:
        return None


async def test_held_keys_serve_while_a_refresh_hangs(tmp_path: Path) -> None:
    clock = ManualClock(START)
    source = SlowProvider(json.dumps(Provider([RSA]).jwks()).encode())
    keys = Keys(source, clock, refresh_min_s=60, max_age_s=3600)
    authenticator = OidcAuthenticator(SETTINGS, keys, clock)
    assert await authenticator.authenticate(sign(RSA, claims(clock.now()))) is not None
    clock.advance(3601)  # old: the next request fetches, and the provider hangs
    hanging = asyncio.create_task(authenticator.authenticate(sign(RSA, claims(clock.now()))))
    await asyncio.sleep(0)
    assert source.fetches == 2
    assert not hanging.done()
    caller = await asyncio.wait_for(authenticator.authenticate(sign(RSA, claims(clock.now()))), 1)
    assert caller is not None  # served by the held keys, without waiting for the fetch
    source.release.set()
    assert await hanging is not None
