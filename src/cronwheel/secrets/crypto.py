"""Sealing a team secret: AES-256-GCM under the newest key of a :class:`Keyring`, bound to the
secret's team and name. Pure: no store, no files, no clock.

Why these choices:

* **An AEAD cipher** (authenticated encryption with associated data): a sealed value whose bytes
  were changed, or that is opened with another key, fails to open (``InvalidTag``) instead of
  decrypting into garbage that a worker would then send as a credential.
* **The team and name as associated data**: they are not encrypted, but they are authenticated, so
  a value copied into another row (another team's, or another name of the same team) does not
  open there. Someone who can write the database still cannot make team B's job send team A's
  credential.
* **A random 96-bit nonce per value**, as NIST SP 800-38D recommends for GCM: with at most
  2^32 seals per key the chance of a repeated nonce stays below 2^-32. A team's secrets are
  written by people, not in a loop; rotating the key (``cronwheel secrets reencrypt``) resets the
  count anyway.
* **The key id stored beside each value** (:class:`Sealed`), so that a keyring holding an old and
  a new key opens both while values are rewritten under the new one.

A sealed value is ``FORMAT (1 byte) || nonce (12 bytes) || ciphertext || tag (16 bytes)``; the
format byte lets a later version change the construction without guessing.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from cronwheel.errors import PermanentError

FORMAT = 1
NONCE_BYTES = 12
KEY_BYTES = 32  # AES-256
TAG_BYTES = 16
KEY_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")
_AAD_LABEL = b"cronwheel secret v1"


class KeyringError(PermanentError):
    """The keys given to this process cannot be used (malformed, duplicated, of the wrong size).
    Messages name where the key came from and its id, never its bytes."""


class UnsealError(PermanentError):
    """A sealed value this process cannot open. Messages name the secret, never its value."""


class MissingKeyError(UnsealError):
    """The value was sealed under a key this process does not hold."""


@dataclass(frozen=True, slots=True)
class Key:
    """One AES-256 key and the id stored with every value it seals."""

    id: str
    material: bytes = field(repr=False)

    def __post_init__(self) -> None:
        if not KEY_ID.fullmatch(self.id):
            raise KeyringError(f"key id {self.id!r} must be 1-64 of A-Z a-z 0-9 . _ -")
        if len(self.material) != KEY_BYTES:
            raise KeyringError(f"key {self.id!r} is {len(self.material)} bytes, not {KEY_BYTES}")


def new_key(key_id: str) -> Key:
    """A fresh random key (the operating system's CSPRNG)."""
    return Key(key_id, os.urandom(KEY_BYTES))


class Keyring:
    """The keys a process holds, oldest first. The newest (last) seals every new value; each key
    opens the values stored with its id. Its ``repr`` shows ids only."""

    def __init__(self, keys: Sequence[Key]) -> None:
        if not keys:
            raise KeyringError("a keyring needs at least one key")
        ids = [key.id for key in keys]
        repeated = sorted({key_id for key_id in ids if ids.count(key_id) > 1})
        if repeated:
            raise KeyringError(f"key id(s) given more than once: {', '.join(repeated)}")
        self._keys = {key.id: key for key in keys}
        self.newest = keys[-1]

    @property
    def ids(self) -> tuple[str, ...]:
        return tuple(self._keys)

    def get(self, key_id: str) -> Key | None:
        return self._keys.get(key_id)

    def __repr__(self) -> str:
        return f"Keyring(ids={list(self._keys)}, newest={self.newest.id!r})"


@dataclass(frozen=True, slots=True)
class Sealed:
    """A sealed value and the id of the key that sealed it (both stored)."""

    key_id: str
    value: bytes = field(repr=False)


def associated_data(team: str, name: str) -> bytes:
    """What a sealed value is bound to: a label, then the team and the name, each prefixed with
    its length (so that no two (team, name) pairs give the same bytes, whatever they hold)."""
    parts = [_AAD_LABEL, team.encode(), name.encode()]
    return b"".join(len(part).to_bytes(4, "big") + part for part in parts)


def seal(keyring: Keyring, team: str, name: str, plaintext: str) -> Sealed:
    """``plaintext`` sealed under the keyring's newest key, bound to ``team`` and ``name``."""
    key = keyring.newest
    nonce = os.urandom(NONCE_BYTES)
    ciphertext = AESGCM(key.material).encrypt(nonce, plaintext.encode(), associated_data(team, name))
    return Sealed(key.id, bytes([FORMAT]) + nonce + ciphertext)


def unseal(keyring: Keyring, team: str, name: str, sealed: Sealed) -> str:
    """The value of the secret ``team``/``name``; :class:`UnsealError` (naming the secret and the
    key, never a byte of the value) when this keyring cannot open it."""
    where = f"secret {name!r} of team {team!r}"
    key = keyring.get(sealed.key_id)
    if key is None:
        raise MissingKeyError(
            f"{where} was encrypted with key {sealed.key_id!r}, which this process does not have "
            f"(it has {', '.join(keyring.ids)}; give it the key with CRONWHEEL_SECRET_KEYS or "
            "--secret-key-file)"
        )
    value = sealed.value
    if len(value) < 1 + NONCE_BYTES + TAG_BYTES or value[0] != FORMAT:
        raise UnsealError(f"{where} is not a sealed value this version of cronwheel can read")
    nonce, ciphertext = value[1 : 1 + NONCE_BYTES], value[1 + NONCE_BYTES :]
    try:
        plaintext = AESGCM(key.material).decrypt(nonce, ciphertext, associated_data(team, name))
    except InvalidTag:
        raise UnsealError(
            f"{where} does not open with key {key.id!r}: the key is not the one it was encrypted "
            "with, or the stored value was changed or moved from another row"
        ) from None
    try:
        return plaintext.decode()
    except UnicodeDecodeError:  # authentic, so written by a bug: say so rather than guess
        raise UnsealError(f"{where} does not hold UTF-8 text") from None
