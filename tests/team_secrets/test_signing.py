"""Standard Webhooks signatures (cronwheel.secrets.signing), verified with the specification's
reference library (``standardwebhooks``): what we sign, it accepts; what we refuse, never shows."""

from __future__ import annotations

import base64
import time

import pytest
from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError

from cronwheel.secrets.signing import (
    SigningSecretError,
    new_signing_secret,
    signature_header,
    signing_keys,
)

BODY = b'{"hello":"w\xc3\xb6rld","n":1}'
ID = "01931c4e-run-0001"


def _headers(signature: str, timestamp: int) -> dict[str, str]:
    return {"webhook-id": ID, "webhook-timestamp": str(timestamp), "webhook-signature": signature}


def test_the_reference_library_verifies_our_signature() -> None:
    secret = new_signing_secret()
    now = int(time.time())
    header = signature_header(signing_keys(secret, "s"), ID, now, BODY)
    assert header.startswith("v1,")
    assert Webhook(secret).verify(BODY, _headers(header, now)) == {"hello": "wörld", "n": 1}


def test_an_empty_body_is_signed_as_empty() -> None:
    secret = new_signing_secret()
    now = int(time.time())
    header = signature_header(signing_keys(secret, "s"), ID, now, b"")
    Webhook(secret).verify(b"", _headers(header, now), json_parse=False)


def test_a_changed_byte_id_or_timestamp_fails_verification() -> None:
    secret = new_signing_secret()
    now = int(time.time())
    header = signature_header(signing_keys(secret, "s"), ID, now, BODY)
    webhook = Webhook(secret)
    with pytest.raises(WebhookVerificationError):
        webhook.verify(BODY.replace(b"1", b"2"), _headers(header, now))
    with pytest.raises(WebhookVerificationError):
        webhook.verify(BODY, {**_headers(header, now), "webhook-id": ID + "x"})
    with pytest.raises(WebhookVerificationError):
        webhook.verify(BODY, _headers(header, now + 1))


def test_during_a_rotation_two_signatures_each_verify_with_its_own_key() -> None:
    new, old = new_signing_secret(), new_signing_secret()
    now = int(time.time())
    header = signature_header(signing_keys(f"{new} {old}", "s"), ID, now, BODY)
    assert len(header.split(" ")) == 2
    Webhook(new).verify(BODY, _headers(header, now))
    Webhook(old).verify(BODY, _headers(header, now))
    with pytest.raises(WebhookVerificationError):
        Webhook(new_signing_secret()).verify(BODY, _headers(header, now))


def test_the_reference_libraries_unpadded_and_24_to_64_byte_keys_are_accepted() -> None:
    for size in (24, 64):
        raw = bytes(range(size))
        unpadded = "whsec_" + base64.b64encode(raw).decode().rstrip("=")
        assert signing_keys(unpadded, "s") == (raw,)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("", "one whsec_ key, or two"),
        (" ".join([new_signing_secret()] * 3), "it holds 3 entries"),
        ("c2VjcmV0LXZhbHVlLXRoYXQtaXMtbG9uZy1lbm91Z2g=", "must start with whsec_"),
        ("whsec_not*base64!", "is not base64"),
        ("whsec_" + base64.b64encode(b"short").decode(), "5-byte key"),
        ("whsec_" + base64.b64encode(bytes(65)).decode(), "65-byte key"),
    ],
    ids=["empty", "three", "no-prefix", "not-base64", "too-short", "too-long"],
)
def test_what_is_not_a_signing_secret_is_refused_without_quoting_it(value: str, message: str) -> None:
    with pytest.raises(SigningSecretError, match=message) as raised:
        signing_keys(value, "secret 'webhook-signing'")
    assert "secret 'webhook-signing'" in str(raised.value)
    for part in value.split():
        assert part.removeprefix("whsec_") not in str(raised.value)
