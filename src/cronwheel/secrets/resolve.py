"""Resolving a target's secret references on the worker, at attempt time (guarantee 9).

The executors call :meth:`SecretResolver.resolve` with the names an attempt needs: they are read
from the store in one read (or taken from a short-lived cache of the *sealed* rows), opened with
this process's keyring, and handed back as a :class:`Resolved`, which substitutes them into the
target for this attempt only. Nothing resolved is kept: not in the job, the run, the queue, a log
line or the cache (which holds ciphertext).

What a target does with a credential is out of our hands: a command may print its environment, a
webhook may echo its headers in its response body. So :meth:`Resolved.redacted` replaces every
resolved value found in the attempt's kept output and error with ``[secret:NAME]`` before the
attempt is recorded, and also a fragment of one (at least :data:`MIN_FRAGMENT` characters) cut at
either end of the kept text, where the 1 KiB window may split it. Transformed values (base64,
split across lines) are not recognised: a target that prints its credentials is still a leak.

**Cache.** Each (team, name) read is kept :attr:`SecretResolver.ttl_s` seconds (5 s), found or
not, so that a burst of attempts of one team costs one store read, and the team default signing
secret (looked up for every HTTP attempt) costs nothing per attempt. Reads of one team are made one
at a time: the attempts of a burst that all miss the cache wait for the first one's read instead of
each making its own (a herd at the top of the minute is one read per team, not one per attempt).
A secret set, changed or deleted therefore reaches a worker of another process within 5 s; in one
process (``cronwheel server``) the API tells the resolver at once (:meth:`SecretResolver.forget`).
"""

from __future__ import annotations

import asyncio
import collections
import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from cronwheel.clock import monotonic_of
from cronwheel.errors import PermanentError
from cronwheel.model import AttemptResult, Target
from cronwheel.secrets.crypto import Keyring, Sealed, unseal
from cronwheel.store.port import SecretReader, StoredSecret
from cronwheel.targets.kinds import resolved

UNREADABLE = "the job's secrets could not be read: the store is unavailable"  # a TransientError's text
MIN_FRAGMENT = 4  # characters of a secret's value cut at an edge of the kept output, redacted
TTL_S = 5.0
MAX_ENTRIES = 10_000

T = TypeVar("T", bound=Target)


class SecretUnavailableError(PermanentError):
    """A secret an attempt needs cannot be had here: it does not exist, or this process cannot
    open it. The message names the secret and says what to do; it never holds a value."""


@dataclass(frozen=True, slots=True)
class Resolved:
    """The values of the secrets one attempt needs, by name (never printed: ``repr`` hides them)."""

    values: Mapping[str, str] = field(default_factory=dict, repr=False)

    def get(self, name: str) -> str | None:
        return self.values.get(name)

    def target(self, target: T) -> T:
        """``target`` with its secret references replaced by their values (for this attempt), and
        its reference-only fields (a webhook's signing secret) dropped."""
        return resolved(target, self.values)

    def redact(self, text: str | None) -> str | None:
        """``text`` without any resolved value (see the module docstring)."""
        if not text or not self.values:
            return text
        ordered = sorted(self.values.items(), key=lambda item: len(item[1]), reverse=True)
        for name, value in ordered:
            text = text.replace(value, f"[secret:{name}]")
        for name, value in ordered:
            text = _redact_edges(text, name, value)
        return text

    def redacted(self, result: AttemptResult) -> AttemptResult:
        """``result`` with its error, output and output tail redacted."""
        if not self.values:
            return result
        return dataclasses.replace(
            result,
            error=self.redact(result.error),
            output=self.redact(result.output),
            output_tail=self.redact(result.output_tail),
        )


def _redact_edges(text: str, name: str, value: str) -> str:
    """Redact the longest prefix of ``value`` that ends ``text`` and the longest suffix of it that
    starts ``text`` (a value cut by the kept window), when at least MIN_FRAGMENT long."""
    for size in range(min(len(value) - 1, len(text)), MIN_FRAGMENT - 1, -1):
        if text.endswith(value[:size]):
            text = text[:-size] + f"[secret:{name}]"
            break
    for size in range(min(len(value) - 1, len(text)), MIN_FRAGMENT - 1, -1):
        if text.startswith(value[-size:]):
            text = f"[secret:{name}]" + text[size:]
            break
    return text


NOTHING = Resolved()


class SecretResolver:
    """Reads, caches (sealed) and opens a team's secrets for the worker's attempts."""

    def __init__(
        self,
        store: SecretReader | None,
        keyring: Keyring | None,
        *,
        clock: object | None = None,
        ttl_s: float = TTL_S,
        max_entries: int = MAX_ENTRIES,
    ) -> None:
        self._store = store
        self._keyring = keyring
        self._monotonic = monotonic_of(clock)
        self.ttl_s = ttl_s
        self._max_entries = max_entries
        self._cache: collections.OrderedDict[tuple[str, str], tuple[float, StoredSecret | None]] = (
            collections.OrderedDict()
        )
        self._reading: dict[str, tuple[asyncio.Lock, int]] = {}  # team -> its read lock, and users

    async def resolve(self, team: str, required: Sequence[str], optional: Sequence[str] = ()) -> Resolved:
        """The values of ``team``'s secrets ``required`` (each must exist) and ``optional`` (those
        that exist). Raises :class:`SecretUnavailableError`; a store that cannot be read raises its
        ``TransientError``."""
        names = list(dict.fromkeys([*required, *optional]))
        if not names:
            return NOTHING
        if self._store is None:
            if required:
                raise SecretUnavailableError(
                    f"this worker has no secret store, so it cannot read secret {required[0]!r} "
                    f"of team {team!r}"
                )
            return NOTHING
        stored = await self._read(team, names)
        for name in required:
            if stored.get(name) is None:
                raise SecretUnavailableError(
                    f"secret {name!r} does not exist in team {team!r} (deleted since it was referenced?); "
                    f"set it with `cronwheel secrets set {team}/{name}`"
                )
        return Resolved({name: self._open(secret) for name, secret in stored.items() if secret is not None})

    def forget(self, team: str, name: str) -> None:
        """Drop a cached secret (it was just set or deleted in this process)."""
        self._cache.pop((team, name), None)

    async def _read(self, team: str, names: list[str]) -> dict[str, StoredSecret | None]:
        found = self._cached(team, names)
        if len(found) == len(names):
            return found
        lock, users = self._reading.get(team, (asyncio.Lock(), 0))
        self._reading[team] = (lock, users + 1)
        try:
            async with lock:  # another attempt of the team may have read them meanwhile
                found = self._cached(team, names)
                missing = [name for name in names if name not in found]
                if missing:
                    assert self._store is not None
                    read = await self._store.get_secrets(team, missing)
                    expires = self._monotonic.monotonic() + self.ttl_s
                    for name in missing:
                        found[name] = read.get(name)
                        self._remember((team, name), expires, found[name])
        finally:
            lock, users = self._reading[team]
            if users == 1:
                del self._reading[team]
            else:
                self._reading[team] = (lock, users - 1)
        return found

    def _cached(self, team: str, names: list[str]) -> dict[str, StoredSecret | None]:
        now = self._monotonic.monotonic()
        found: dict[str, StoredSecret | None] = {}
        for name in names:
            entry = self._cache.get((team, name))
            if entry is not None and entry[0] > now:
                found[name] = entry[1]
        return found

    def _remember(self, key: tuple[str, str], expires: float, secret: StoredSecret | None) -> None:
        self._cache[key] = (expires, secret)
        self._cache.move_to_end(key)
        while len(self._cache) > self._max_entries:
            self._cache.popitem(last=False)

    def _open(self, secret: StoredSecret) -> str:
        if self._keyring is None:
            raise SecretUnavailableError(
                f"this worker has no secret keys, so it cannot read secret {secret.name!r} of team "
                f"{secret.team!r} (give it the keys with CRONWHEEL_SECRET_KEYS or --secret-key-file)"
            )
        try:
            return unseal(self._keyring, secret.team, secret.name, Sealed(secret.key_id, secret.value))
        except PermanentError as error:  # UnsealError: its text names the secret and the key
            raise SecretUnavailableError(str(error)) from None
