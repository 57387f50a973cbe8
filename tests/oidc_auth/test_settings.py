"""The operator's OIDC settings are checked at start: combinations that cannot work are refused
with a message naming the option, before any backend is touched (``cronwheel server`` exits 2)."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from cronwheel.auth.identity import Scope
from cronwheel.auth.oidc import OidcSettings
from cronwheel.errors import PermanentError

from .provider import AUDIENCE, ISSUER, Provider, rsa_key

GOOD = OidcSettings(
    issuer=ISSUER, audience=AUDIENCE, jwks_url="https://idp.example.com/certs", roles=("reader=read",)
)


def test_off_by_default_and_the_good_settings_pass() -> None:
    OidcSettings().check()
    assert not OidcSettings().enabled
    GOOD.check()
    replace(GOOD, jwks_url="http://127.0.0.1:8081/certs").check()  # plain HTTP to this machine
    replace(GOOD, jwks_url="http://localhost/certs").check()


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (OidcSettings(audience=AUDIENCE), "the --oidc-* options need --oidc-issuer"),
        (OidcSettings(roles=("a=read",)), "the --oidc-* options need --oidc-issuer"),
        (replace(GOOD, audience=None), "--oidc-issuer needs --oidc-audience"),
        (replace(GOOD, jwks_url=None), "--oidc-jwks-url or --oidc-jwks-file, one of them"),
        (replace(GOOD, jwks_file="/etc/jwks.json"), "--oidc-jwks-url or --oidc-jwks-file, one of them"),
        (replace(GOOD, jwks_url="http://idp.example.com/certs"), "must be https://"),
        (replace(GOOD, jwks_url="ftp://idp.example.com/certs"), "must be https://"),
        (replace(GOOD, roles=()), "at least one --oidc-role"),
        (replace(GOOD, roles=("reader",)), "--oidc-role takes ROLE=SCOPE[,SCOPE]"),
        (replace(GOOD, roles=("reader=",)), "--oidc-role takes ROLE=SCOPE[,SCOPE]"),
        (replace(GOOD, roles=("reader=read,owner",)), "not 'reader=read,owner'"),
        (replace(GOOD, team_claim=""), "--oidc-team-claim and --oidc-role-claim must name a claim"),
        (
            replace(GOOD, jwks_url=None, jwks_file="/nonexistent/jwks.json"),
            "cannot read /nonexistent/jwks.json",
        ),
    ],
)
def test_settings_that_cannot_work_are_refused(settings: OidcSettings, message: str) -> None:
    with pytest.raises(PermanentError, match=re.escape(message)):
        settings.check()


def test_a_key_file_is_read_at_start(tmp_path: Path) -> None:
    good = Provider([rsa_key()]).write(tmp_path / "jwks.json")
    replace(GOOD, jwks_url=None, jwks_file=str(good)).check()
    hmac_only = tmp_path / "hmac.json"
    hmac_only.write_text(json.dumps({"keys": [{"kty": "oct", "k": "c2VjcmV0"}]}))
    with pytest.raises(PermanentError, match="no usable signing key"):
        replace(GOOD, jwks_url=None, jwks_file=str(hmac_only)).check()


def test_roles_are_parsed_and_a_role_named_twice_adds_up() -> None:
    settings = replace(GOOD, roles=("dev = read, trigger", "dev=write", "ops=admin"))
    assert settings.role_scopes() == {
        "dev": frozenset({Scope.READ, Scope.TRIGGER, Scope.WRITE}),
        "ops": frozenset({Scope.ADMIN}),
    }
