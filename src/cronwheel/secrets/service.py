"""Setting, listing, deleting and re-encrypting team secrets: what the API's secret routes call.

A value comes in once, is checked (text, not empty, at most :data:`MAX_VALUE_BYTES`; the team's
default signing secret must hold ``whsec_`` keys), sealed under the newest key and stored. Nothing
here returns a value: reads give names, key ids and times.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from cronwheel.audit import Actor, AuditAction
from cronwheel.clock import Clock
from cronwheel.errors import InvalidInputError, NotFoundError, PermanentError
from cronwheel.secrets.crypto import Keyring, Sealed, UnsealError, seal, unseal
from cronwheel.secrets.signing import TEAM_DEFAULT, SigningSecretError, signing_keys
from cronwheel.store import Page
from cronwheel.store.port import SecretStore, StoredSecret

MAX_VALUE_BYTES = 16 * 1024
REKEY_BATCH = 100


class SecretsNotConfiguredError(PermanentError):
    """This process holds no secret keys, so it cannot store a value (cluster mode without
    ``CRONWHEEL_SECRET_KEYS`` or ``--secret-key-file``)."""


@dataclass(frozen=True, slots=True)
class Reencryption:
    """What :meth:`SecretService.reencrypt` did."""

    key_id: str  # the newest key, which every rewritten value is now sealed under
    rewritten: int = 0
    changed_meanwhile: int = 0  # set again while being rewritten: already under a current key
    failed: tuple[tuple[str, str, str], ...] = ()  # (team, name, why): values this process cannot open


def _target(team: str, name: str) -> tuple[str, str, str]:
    return ("secret", f"{team}/{name}", name)


def check_value(name: str, value: str) -> None:
    """Refuse a value no target could use (InvalidInputError, never quoting it)."""
    if not value:
        raise InvalidInputError("a secret's value must not be empty")
    if "\0" in value:
        raise InvalidInputError("a secret's value must not contain a NUL byte")
    try:
        size = len(value.encode())
    except UnicodeEncodeError:
        raise InvalidInputError("a secret's value must be valid Unicode text") from None
    if size > MAX_VALUE_BYTES:
        raise InvalidInputError(f"a secret's value is at most {MAX_VALUE_BYTES} bytes (UTF-8), not {size}")
    if name == TEAM_DEFAULT:
        try:
            signing_keys(value, f"secret {name!r} (the team's webhook signing secret)")
        except SigningSecretError as error:
            raise InvalidInputError(str(error)) from None


class SecretService:
    """The team secrets of one store, sealed with one keyring (None: this process has no keys
    and can list and delete secrets, not set them). ``changed(team, name)`` is told of every set
    and delete (``cronwheel server``: the worker's resolver forgets its cached copy)."""

    def __init__(
        self,
        store: SecretStore,
        keyring: Keyring | None,
        clock: Clock,
        changed: Callable[[str, str], None] | None = None,
    ) -> None:
        self.store = store
        self.keyring = keyring
        self.clock = clock
        self._changed = changed or (lambda team, name: None)

    def _keys(self) -> Keyring:
        if self.keyring is None:
            raise SecretsNotConfiguredError(
                "this server holds no secret keys, so it cannot store secrets: start it with "
                "CRONWHEEL_SECRET_KEYS or --secret-key-file (docs/security.md, Secrets)"
            )
        return self.keyring

    async def set(
        self, team: str, name: str, value: str, actor: Actor | None = None
    ) -> tuple[StoredSecret, bool]:
        """Create or replace the secret; returns it (sealed) and whether it was created. The audit
        entry (of ``actor``) records the key id and times, never the value."""
        check_value(name, value)
        sealed = seal(self._keys(), team, name, value)
        now = self.clock.now()
        entry = None if actor is None else actor.entry(AuditAction.SECRET_SET, now, team, _target(team, name))
        stored = await self.store.put_secret(
            StoredSecret(team, name, sealed.key_id, sealed.value, now, now), audit=entry
        )
        self._changed(team, name)
        return stored

    async def get(self, team: str, name: str) -> StoredSecret:
        found = (await self.store.get_secrets(team, [name])).get(name)
        if found is None:
            raise NotFoundError(f"team {team!r} has no secret named {name!r}")
        return found

    async def list(self, team: str, limit: int = 100, cursor: str | None = None) -> Page[StoredSecret]:
        return await self.store.list_secrets(team, limit, cursor)

    async def delete(self, team: str, name: str, actor: Actor | None = None) -> StoredSecret:
        now = self.clock.now()
        entry = (
            None if actor is None else actor.entry(AuditAction.SECRET_DELETE, now, team, _target(team, name))
        )
        deleted = await self.store.delete_secret(team, name, audit=entry)
        self._changed(team, name)
        return deleted

    async def reencrypt(self, batch: int = REKEY_BATCH, actor: Actor | None = None) -> Reencryption:
        """Rewrite every secret sealed under an older key under the newest one. Safe to run
        again, and while secrets are being set: a value set meanwhile is left as it is (it is
        already under a current key). A value this process cannot open is reported, not lost.
        ``actor``'s audit entry (what was done, of no one team) is appended once it is over."""
        done = await self._reencrypt(batch)
        if actor is not None:
            after = {
                "key_id": done.key_id,
                "rewritten": done.rewritten,
                "changed_meanwhile": done.changed_meanwhile,
                "failed": [f"{team}/{name}" for team, name, _ in done.failed],
            }
            entry = actor.entry(
                AuditAction.SECRETS_REENCRYPT, self.clock.now(), None, ("secrets", None, None)
            )
            await self.store.append_audit([entry.changed(None, after)])
        return done

    async def _reencrypt(self, batch: int) -> Reencryption:
        keyring = self._keys()
        outcomes: list[str | None] = []  # per secret: None rewritten, "" changed meanwhile, else why not
        failed: list[tuple[str, str, str]] = []
        after: tuple[str, str] | None = None
        while True:
            found = await self.store.secrets_to_rekey(keyring.newest.id, after, batch)
            for secret in found:
                outcome = await self._rekey(keyring, secret)
                outcomes.append(outcome)
                if outcome:
                    failed.append((secret.team, secret.name, outcome))
            if len(found) < batch:
                return Reencryption(
                    keyring.newest.id, outcomes.count(None), outcomes.count(""), tuple(failed)
                )
            after = (found[-1].team, found[-1].name)

    async def _rekey(self, keyring: Keyring, secret: StoredSecret) -> str | None:
        """None: rewritten; "": set meanwhile (left alone); else why it cannot be opened."""
        try:
            value = unseal(keyring, secret.team, secret.name, Sealed(secret.key_id, secret.value))
        except UnsealError as error:
            return str(error)
        sealed = seal(keyring, secret.team, secret.name, value)
        return None if await self.store.rekey_secret(secret, sealed.key_id, sealed.value) else ""
