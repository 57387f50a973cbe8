"""The identity provider's public keys: a JWK Set read from a URL or a file, cached.

:class:`Keys` answers the keys a token may have been signed with (its ``kid`` and ``alg``). It
fetches the set on first use, again when the set is older than ``max_age_s``, and again when a
token names a key id the set does not have (the provider rotated its keys): at most once per
``refresh_min_s`` whatever arrives, so that a flood of tokens with made-up key ids costs the
provider one request a minute, not one per token. A fetch that fails keeps the keys held (stale
keys verify until the provider answers again), and while a refresh of old keys is under way the
held keys keep serving (a stalled provider delays no request whose key is known); with no keys at
all, verification is impossible and the request is answered 503
(:class:`~cronwheel.errors.BackendUnavailableError`).

Only asymmetric signing keys are kept (:data:`ALGORITHMS`): a symmetric (``oct``) key or one
marked for encryption is ignored, so that no token signed with HMAC can be checked against a
public key (algorithm confusion).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

import aiohttp
from jwt import PyJWK, PyJWTError

from cronwheel.clock import Clock, monotonic_of
from cronwheel.errors import BackendUnavailableError, PermanentError

log = logging.getLogger("cronwheel.oidc")

ALGORITHMS = frozenset(
    {"RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA"}
)
"""The signature algorithms accepted: RSA, RSA-PSS, ECDSA and Ed25519. Never ``none``, never HMAC."""

MAX_JWKS_BYTES = 1024 * 1024  # a provider's set is a few KiB; more is not a key set


class JwksError(PermanentError):
    """A key set that cannot be used: not JSON, no ``keys`` list, no usable signing key."""


@dataclass(frozen=True, slots=True)
class KeySet:
    """The usable signing keys of one JWK Set."""

    keys: tuple[PyJWK, ...]

    def find(self, kid: str | None, alg: str) -> list[PyJWK]:
        """The keys a token with ``kid`` (None: it names none) and ``alg`` may be signed with."""
        return [key for key in self.keys if key.algorithm_name == alg and (kid is None or key.key_id == kid)]

    @property
    def ids(self) -> list[str]:
        return [key.key_id or "(no kid)" for key in self.keys]


def parse_jwks(document: bytes | str, origin: str) -> KeySet:
    """The usable signing keys of a JWK Set document (:class:`JwksError` when there are none)."""
    try:
        data: Any = json.loads(document)
    except (ValueError, UnicodeDecodeError):
        raise JwksError(f"the OIDC keys at {origin} are not JSON") from None
    entries = data.get("keys") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise JwksError(f"the OIDC keys at {origin} are not a JWK Set (an object with a 'keys' list)")
    keys = tuple(key for key in map(_signing_key, entries) if key is not None)
    if not keys:
        raise JwksError(
            f"the OIDC keys at {origin} hold no usable signing key ({', '.join(sorted(ALGORITHMS))})"
        )
    return KeySet(keys)


def _signing_key(entry: Any) -> PyJWK | None:
    if not isinstance(entry, dict) or entry.get("use", "sig") != "sig":
        return None
    try:
        key = PyJWK(entry)
    except PyJWTError:
        return None  # a kind of key PyJWT cannot use, or a malformed one: others may be usable
    return key if key.algorithm_name in ALGORITHMS else None


class Source(Protocol):
    """Where a key set comes from."""

    origin: str

    async def fetch(self) -> bytes: ...

    async def close(self) -> None: ...


class FileSource:
    """A JWK Set in a file (read again on refresh: a tool that rotates the file is seen)."""

    def __init__(self, path: str) -> None:
        self.origin = path
        self.path = Path(path)

    async def fetch(self) -> bytes:
        try:
            return await asyncio.to_thread(self.path.read_bytes)
        except OSError as error:
            raise JwksError(f"cannot read the OIDC keys at {self.path}: {error.strerror or error}") from None

    async def close(self) -> None:
        return None


class UrlSource:
    """A JWK Set at a URL (the provider's ``jwks_uri``), fetched with a timeout, no redirects,
    at most :data:`MAX_JWKS_BYTES`."""

    def __init__(self, url: str, timeout_s: float = 5.0) -> None:
        self.origin = url
        self.timeout = aiohttp.ClientTimeout(total=timeout_s)
        self._session: aiohttp.ClientSession | None = None

    async def fetch(self) -> bytes:
        if self._session is None:
            self._session = aiohttp.ClientSession(timeout=self.timeout)
        try:
            async with self._session.get(self.origin, allow_redirects=False) as response:
                if response.status != 200:
                    raise JwksError(f"the OIDC keys at {self.origin} answered HTTP {response.status}")
                body = await response.content.read(MAX_JWKS_BYTES + 1)
        except (aiohttp.ClientError, TimeoutError) as error:
            reason = type(error).__name__ if isinstance(error, TimeoutError) else str(error)
            raise JwksError(f"cannot fetch the OIDC keys at {self.origin}: {reason}") from None
        if len(body) > MAX_JWKS_BYTES:
            raise JwksError(f"the OIDC keys at {self.origin} are larger than {MAX_JWKS_BYTES} bytes")
        return body

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


class Keys:
    """The cached key set of one provider (see the module docstring)."""

    def __init__(
        self, source: Source, clock: Clock, *, refresh_min_s: float = 60.0, max_age_s: float = 3600.0
    ) -> None:
        self.source = source
        self.refresh_min_s = refresh_min_s
        self.max_age_s = max_age_s
        self._monotonic: Callable[[], float] = monotonic_of(clock).monotonic
        self._set: KeySet | None = None
        self._fetched_at: float | None = None  # the last fetch that gave keys
        self._tried_at: float | None = None  # the last fetch, whatever it gave
        self._lock = asyncio.Lock()
        self.fetches = 0  # fetches tried (for tests and the start-up line)

    async def candidates(self, kid: str | None, alg: str) -> list[PyJWK]:
        """The keys a token naming ``kid`` and ``alg`` may be signed with; fetched first when
        there are none yet, when they are old, or when none matches (rate-limited)."""
        if self._set is None or (self._old() and not self._lock.locked()):  # held keys: no waiting on a fetch
            await self.refresh()
        found = [] if self._set is None else self._set.find(kid, alg)
        if not found and self._set is not None:
            await self.refresh()  # an unknown key id: the provider may have rotated its keys
            found = self._set.find(kid, alg)
        if self._set is None:
            raise BackendUnavailableError(
                f"the identity provider's keys could not be read from {self.source.origin}: "
                "its tokens cannot be verified yet"
            )
        return found

    async def refresh(self) -> bool:
        """Fetch the set unless a fetch was tried less than ``refresh_min_s`` ago; whether it gave
        keys. A failure keeps the keys held and is logged."""
        async with self._lock:
            now = self._monotonic()
            if self._tried_at is not None and now - self._tried_at < self.refresh_min_s:
                return False
            self._tried_at = now
            self.fetches += 1
            try:
                keys = parse_jwks(await self.source.fetch(), self.source.origin)
            except JwksError as error:
                held = "none" if self._set is None else f"keeping {len(self._set.keys)} held"
                log.warning(
                    "OIDC keys not refreshed",
                    extra={"action": "oidc_keys", "error": str(error), "held": held},
                )
                return False
            self._set, self._fetched_at = keys, now
            log.info(
                "OIDC keys", extra={"action": "oidc_keys", "origin": self.source.origin, "kids": keys.ids}
            )
            return True

    def _old(self) -> bool:
        return self._fetched_at is None or self._monotonic() - self._fetched_at > self.max_age_s

    async def close(self) -> None:
        await self.source.close()
