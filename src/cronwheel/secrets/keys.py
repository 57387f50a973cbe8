"""Where a process gets the keys that seal team secrets (:mod:`cronwheel.secrets.crypto`).

One of, checked in this order:

* ``CRONWHEEL_SECRET_KEYS``: the keys themselves, in the environment (a container orchestrator's
  secret, an env file readable only by the service's user). Never a command-line option: those
  land in shell history and in ``ps``.
* ``--secret-key-file PATH`` (``CRONWHEEL_SECRET_KEY_FILE``): a file holding them (a mounted
  secret, a file only the service's user can read).
* Embedded mode only, neither given: ``<database>.keys`` next to the SQLite file, created with one
  new key and mode 0600 by the first ``cronwheel server`` start, read by the next ones. The
  quickstart stays one command; the file must be backed up with the database (without it the
  stored secrets cannot be read).

Both forms hold one key per entry, ``ID:BASE64`` (32 random bytes, standard or URL-safe base64,
padding optional), oldest first: the **last** key seals new values, every key opens the values
stored with its id. A file has one entry per line and ``#`` comments; the variable may also
separate entries with commas or spaces. To rotate: add a new key at the end (``cronwheel secrets
add-key``), give the new keyring to every worker and scheduler (they only open values) and then
to every api process, then run ``cronwheel secrets reencrypt``; once it reports nothing left under
the old key, remove it.

Nothing here ever prints, logs or raises with a key's bytes: errors name the source, the entry's
position and its id.
"""

from __future__ import annotations

import base64
import binascii
import logging
import os
import re
import stat
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from cronwheel.secrets.crypto import KEY_BYTES, Key, Keyring, KeyringError, new_key

log = logging.getLogger("cronwheel.secrets")

ENV_KEYS = "CRONWHEEL_SECRET_KEYS"
ENV_KEY_FILE = "CRONWHEEL_SECRET_KEY_FILE"
FILE_HEADER = (
    "# cronwheel secret keys: one per line, ID:BASE64 (32 bytes), oldest first; the last one\n"
    "# encrypts new values. Keep this file secret, and back it up with the database: without it\n"
    "# the stored secrets cannot be read.\n"
)
_SEPARATORS = re.compile(r"[,\s]+")


def parse_keys(text: str, source: str) -> Keyring:
    """The keyring ``text`` holds (see the module docstring); ``source`` names it in errors."""
    entries = [
        entry for line in text.splitlines() for entry in _SEPARATORS.split(line.split("#", 1)[0]) if entry
    ]
    if not entries:
        raise KeyringError(f"{source} holds no key (expected ID:BASE64 entries)")
    return Keyring([_parse_entry(entry, f"{source}, key {index}") for index, entry in enumerate(entries, 1)])


def _parse_entry(entry: str, where: str) -> Key:
    key_id, colon, encoded = entry.partition(":")
    if not colon or not key_id or not encoded:
        raise KeyringError(f"{where}: expected ID:BASE64")
    standard = encoded.replace("-", "+").replace("_", "/").rstrip("=")
    try:
        material = base64.b64decode(standard + "=" * (-len(standard) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise KeyringError(f"{where} ({key_id!r}): the key is not valid base64") from None
    if len(material) != KEY_BYTES:
        raise KeyringError(f"{where} ({key_id!r}): the key is {len(material)} bytes, not {KEY_BYTES}")
    return Key(key_id, material)


def key_line(key: Key) -> str:
    """``key`` as an entry of a key file or of ``CRONWHEEL_SECRET_KEYS`` (it holds the key)."""
    return f"{key.id}:{base64.b64encode(key.material).decode()}"


def generate_key(existing: tuple[str, ...] = ()) -> Key:
    """A new random key whose id says when it was made (``k20260302-1f3a9c``)."""
    while True:
        key_id = f"k{datetime.now(UTC):%Y%m%d}-{os.urandom(3).hex()}"
        if key_id not in existing:
            return new_key(key_id)


def read_key_file(path: Path) -> Keyring:
    """The keyring in the file at ``path``. A file that others than its owner may read is used,
    with a warning (a mounted orchestrator secret often is 0644 inside its own container)."""
    try:
        text = path.read_text()
        mode = path.stat().st_mode
    except OSError as error:
        raise KeyringError(f"cannot read the secret key file {path}: {error.strerror}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        log.warning(
            "the secret key file can be read by others than its owner",
            extra={"action": "keys", "path": str(path), "mode": f"{stat.S_IMODE(mode):04o}"},
        )
    return parse_keys(text, str(path))


def create_key_file(path: Path) -> Keyring:
    """Create ``path`` (it must not exist) with one new key, readable and writable by its owner
    only (mode 0600 from the start: never a moment with wider permissions)."""
    key = generate_key()
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as error:
        raise KeyringError(f"cannot create the secret key file {path}: {error.strerror}") from None
    with os.fdopen(descriptor, "w") as file:
        file.write(FILE_HEADER + key_line(key) + "\n")
        file.flush()
        os.fsync(file.fileno())
    return Keyring([key])


def add_key(path: Path) -> Key:
    """Append a new key to the file at ``path`` (creating it, mode 0600, if it does not exist):
    the new key seals new values from the next start of each process that reads the file."""
    if not path.exists():
        return create_key_file(path).newest
    keyring = read_key_file(path)
    key = generate_key(keyring.ids)
    text = path.read_text()
    with path.open("a") as file:
        file.write(("" if text.endswith("\n") or not text else "\n") + key_line(key) + "\n")
        file.flush()
        os.fsync(file.fileno())
    return key


@dataclass(frozen=True, slots=True)
class KeySource:
    """The keyring a process found (None: none given, in cluster mode) and what to say about it."""

    keyring: Keyring | None
    origin: str  # where it came from, for the start-up line: never the keys
    created: bool = False  # the embedded key file was created by this start


def load_keyring(env_text: str | None, key_file: str | None, default_file: Path | None) -> KeySource:
    """The keys this process uses (see the module docstring for the order). ``default_file``:
    the embedded key file next to the database (None in cluster mode)."""
    if env_text and key_file:
        raise KeyringError(
            f"give the secret keys one way: {ENV_KEYS} or --secret-key-file ({ENV_KEY_FILE}), not both"
        )
    if env_text:
        return KeySource(parse_keys(env_text, ENV_KEYS), f"from {ENV_KEYS}")
    if key_file:
        return KeySource(read_key_file(Path(key_file)), f"from {key_file}")
    if default_file is None:
        return KeySource(None, f"none ({ENV_KEYS} and --secret-key-file are unset)")
    if default_file.exists():
        return KeySource(read_key_file(default_file), f"from {default_file}")
    return KeySource(create_key_file(default_file), f"created {default_file} (mode 0600)", created=True)
