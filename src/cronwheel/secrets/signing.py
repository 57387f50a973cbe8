"""Standard Webhooks signatures (https://www.standardwebhooks.com/, "Signature scheme"). Pure.

Every HTTP attempt already carries ``webhook-id`` (the execution id, the same on every attempt of
a run) and ``webhook-timestamp`` (Unix seconds when that attempt was made). When the job has a
signing secret, it also carries::

    webhook-signature: v1,<base64 of HMAC-SHA256(key, "{webhook-id}.{webhook-timestamp}.{body}")>

computed over the exact body bytes sent (the payload's compact JSON, or nothing). A retry is a
new attempt: the same id, a new timestamp, so a new signature, and a receiver that rejects stale
timestamps still accepts it.

A job names its signing secret (``target.signing_secret``, a reference to a team secret); a job
that names none is signed with its team's secret named :data:`TEAM_DEFAULT`, when the team has
one. A signing secret is a team secret whose value is ``whsec_`` followed by the base64 of 24 to 64
random bytes (the specification's advice: at least 192 bits). During a rotation it holds two such
values separated by a space, the new one first: each request then carries one signature per key,
space-separated, and a receiver that knows either key accepts it. Set the secret to the two
values, move the receivers to the new key, then set it to the new key alone.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import os
from collections.abc import Sequence

from cronwheel.errors import PermanentError

TEAM_DEFAULT = "webhook-signing"  # the team secret that signs the HTTP jobs naming no signing secret
PREFIX = "whsec_"
MIN_KEY_BYTES = 24
MAX_KEY_BYTES = 64
MAX_KEYS = 2  # the current key and, during a rotation, the next one
NEW_KEY_BYTES = 32


class SigningSecretError(PermanentError):
    """A secret used for signing that does not hold ``whsec_`` keys. Messages never quote it."""


def signing_keys(value: str, what: str) -> tuple[bytes, ...]:
    """The HMAC keys a signing secret's value holds (one, or two during a rotation); ``what``
    names the secret in errors."""
    entries = value.split()
    if not 1 <= len(entries) <= MAX_KEYS:
        raise SigningSecretError(
            f"{what} must hold one whsec_ key, or two separated by a space during a rotation "
            f"(it holds {len(entries)} entries)"
        )
    return tuple(_key(entry, f"{what} (key {index})") for index, entry in enumerate(entries, 1))


def _key(entry: str, what: str) -> bytes:
    if not entry.startswith(PREFIX):
        raise SigningSecretError(f"{what} is not a Standard Webhooks secret: it must start with {PREFIX}")
    encoded = entry[len(PREFIX) :].rstrip("=")
    try:
        key = base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise SigningSecretError(f"{what}: what follows {PREFIX} is not base64") from None
    if not MIN_KEY_BYTES <= len(key) <= MAX_KEY_BYTES:
        raise SigningSecretError(
            f"{what} is a {len(key)}-byte key; Standard Webhooks keys are "
            f"{MIN_KEY_BYTES}-{MAX_KEY_BYTES} bytes"
        )
    return key


def signature_header(keys: Sequence[bytes], message_id: str, timestamp: int, body: bytes) -> str:
    """The ``webhook-signature`` value: ``v1,<base64>`` for each key, space-separated."""
    signed = f"{message_id}.{timestamp}.".encode() + body
    return " ".join(
        "v1," + base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()).decode() for key in keys
    )


def new_signing_secret() -> str:
    """A fresh ``whsec_`` secret (32 random bytes)."""
    return PREFIX + base64.b64encode(os.urandom(NEW_KEY_BYTES)).decode()
