"""For the receivers of cronwheel's webhooks: verify a Standard Webhooks signature, refuse stale
timestamps, and process each execution once.

cronwheel signs an HTTP target's requests when the job has a signing secret (docs/security.md,
"Signed webhooks")::

    webhook-id: <execution id>          the same on every attempt of a run
    webhook-timestamp: <unix seconds>   when this attempt was sent
    webhook-signature: v1,<base64>      HMAC-SHA256 over "{id}.{timestamp}.{body}"; two during a rotation

A receiver checks the signature with its ``whsec_`` secret (:func:`verify`), and, since delivery is
at least once (a retry after a lost answer repeats a run that was done), drops an execution id it
has already processed (:class:`Receiver` with a :class:`Deduplicator`)::

    receiver = Receiver(os.environ["WEBHOOK_SECRET"], MemoryDeduplicator())

    def handle(headers, body):
        try:
            with receiver.receive(headers, body) as delivery:
                do_the_work(json.loads(delivery.body))      # an exception lets the retry through
        except Duplicate:
            return 200                                      # done already: stop the retries
        except InvalidSignature:
            return 401
        except StaleTimestamp:
            return 400

The signature is checked before the timestamp, so that an unsigned request is always
:class:`InvalidSignature` and :class:`StaleTimestamp` always means an authentic message sent too
long ago (or a clock far off). Comparisons are constant-time. Standard library only: this module
imports neither the server nor its dependencies. Examples: docs/examples/.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from cronwheel.errors import CronwheelError, InvalidInputError

PREFIX = "whsec_"
DEFAULT_TOLERANCE_S = 300.0  # five minutes either way, as the specification's reference library
DEFAULT_TTL_S = 7 * 86_400.0  # longer than a run's retries last (max_attempts 100 x max_delay_s 1 h = 4 days)
MAX_SIGNATURES = 16  # more entries in one header are not read (cronwheel sends one, two during a rotation)

Secrets = str | bytes | Iterable[str | bytes]


class ReceiverError(CronwheelError):
    """Root of what the receiver refuses."""


class InvalidSecret(ReceiverError, InvalidInputError):  # noqa: N818 - reads as the others
    """A configured secret that is not a Standard Webhooks secret (``whsec_`` + base64)."""


class InvalidSignature(ReceiverError):  # noqa: N818
    """Headers missing or malformed, or no signature made with a known secret: not from the sender."""


class StaleTimestamp(ReceiverError):  # noqa: N818
    """An authentic message whose timestamp is too old (a replay) or too far in the future."""

    def __init__(self, message: str, timestamp: int, now: float) -> None:
        super().__init__(message)
        self.timestamp = timestamp
        self.now = now


class Duplicate(ReceiverError):  # noqa: N818
    """An execution id already processed (a retry of a delivery that was done)."""

    def __init__(self, webhook_id: str) -> None:
        super().__init__(f"execution {webhook_id} was received already")
        self.webhook_id = webhook_id


@dataclass(frozen=True, slots=True)
class Delivery:
    """A verified delivery: the execution id, the attempt's timestamp, the body as sent."""

    id: str
    timestamp: int
    body: bytes


def keys(secrets: Secrets) -> tuple[bytes, ...]:
    """The HMAC keys of ``secrets``: ``whsec_...`` strings (a string may hold two, space-separated,
    as cronwheel's signing secret does during a rotation) or raw key bytes."""
    given: Iterable[str | bytes] = [secrets] if isinstance(secrets, (str, bytes)) else secrets
    found: list[bytes] = []
    for secret in given:
        if isinstance(secret, bytes):
            found.append(secret)
        else:
            found += [_key(entry) for entry in secret.split()]
    if not found or not all(found):
        raise InvalidSecret("no webhook secret given")
    return tuple(found)


def _key(entry: str) -> bytes:
    if not entry.startswith(PREFIX):
        raise InvalidSecret(f"a webhook secret starts with {PREFIX}")  # never quote the secret
    encoded = entry[len(PREFIX) :].rstrip("=")
    try:
        return base64.b64decode(encoded + "=" * (-len(encoded) % 4), validate=True)
    except (binascii.Error, ValueError):
        raise InvalidSecret(f"what follows {PREFIX} in a webhook secret is not base64") from None


def _header(headers: Mapping[str, str], name: str) -> str:
    value = headers.get(name)
    if value is None:
        value = next((v for k, v in headers.items() if k.lower() == name), None)
    if not value:
        raise InvalidSignature(f"no {name} header")
    return value


def verify(
    secrets: Secrets,
    headers: Mapping[str, str],
    body: bytes,
    *,
    now: float | None = None,
    tolerance: float = DEFAULT_TOLERANCE_S,
) -> Delivery:
    """The delivery ``headers`` and ``body`` (the exact bytes received) make, if one of its
    signatures was made with one of ``secrets`` and its timestamp is within ``tolerance`` seconds
    of ``now`` (default: the system clock); else :class:`InvalidSignature` or :class:`StaleTimestamp`."""
    known = keys(secrets)
    webhook_id = _header(headers, "webhook-id")
    stamp = _header(headers, "webhook-timestamp")
    if not (stamp.isascii() and stamp.isdigit()) or len(stamp) > 12:
        raise InvalidSignature("webhook-timestamp is not Unix seconds")
    signed = f"{webhook_id}.{stamp}.".encode() + body
    expected = [base64.b64encode(hmac.new(key, signed, hashlib.sha256).digest()) for key in known]
    if not _matches(_header(headers, "webhook-signature"), expected):
        raise InvalidSignature("no signature made with a known secret")
    timestamp = int(stamp)
    moment = time.time() if now is None else now
    if moment - timestamp > tolerance:
        raise StaleTimestamp(
            f"sent {moment - timestamp:.0f} s ago (more than {tolerance:g} s)", timestamp, moment
        )
    if timestamp - moment > tolerance:
        raise StaleTimestamp(
            f"timestamp {timestamp - moment:.0f} s in the future (more than {tolerance:g} s)",
            timestamp,
            moment,
        )
    return Delivery(webhook_id, timestamp, body)


def _matches(header: str, expected: list[bytes]) -> bool:
    found = False
    for entry in header.split()[:MAX_SIGNATURES]:
        version, _, signature = entry.partition(",")
        if version != "v1":
            continue
        given = signature.encode("ascii", "replace")
        for candidate in expected:  # every comparison made: the time says nothing of which matched
            found |= hmac.compare_digest(candidate, given)
    return found


# -- de-duplication ----------------------------------------------------------------------------------


class Deduplicator(Protocol):
    """Where a receiver records the execution ids it has taken (shared by its processes, if several)."""

    def claim(self, webhook_id: str, now: float) -> bool:
        """Record ``webhook_id``; False if it was recorded already and has not expired. Atomic:
        of two concurrent claims of one id, one wins."""

    def release(self, webhook_id: str) -> None:
        """Forget ``webhook_id`` (its processing failed: let the retry in)."""


class MemoryDeduplicator:
    """Ids in this process's memory: each kept ``ttl`` seconds, at most ``max_entries`` (the oldest
    forgotten first; a receiver that takes more executions than that within ``ttl`` needs a
    larger bound or :class:`SqliteDeduplicator`). Thread-safe."""

    def __init__(self, ttl: float = DEFAULT_TTL_S, max_entries: int = 100_000) -> None:
        if ttl <= 0 or max_entries < 1:
            raise InvalidInputError("ttl must be positive and max_entries at least 1")
        self.ttl = ttl
        self.max_entries = max_entries
        self._expiry: OrderedDict[str, float] = OrderedDict()  # in the order claimed: oldest first
        self._lock = threading.Lock()

    def claim(self, webhook_id: str, now: float) -> bool:
        with self._lock:
            while self._expiry and next(iter(self._expiry.values())) <= now:
                self._expiry.popitem(last=False)
            if webhook_id in self._expiry:
                return False
            self._expiry[webhook_id] = now + self.ttl
            while len(self._expiry) > self.max_entries:
                self._expiry.popitem(last=False)
            return True

    def release(self, webhook_id: str) -> None:
        with self._lock:
            self._expiry.pop(webhook_id, None)

    def __len__(self) -> int:
        return len(self._expiry)


class SqliteDeduplicator:
    """Ids in a SQLite file, each kept ``ttl`` seconds: survives restarts and is shared by the
    processes of one machine (a claim is one ``INSERT`` in an immediate transaction). Expired rows
    are deleted every ``purge_every`` claims."""

    def __init__(self, path: str | Path, ttl: float = DEFAULT_TTL_S, purge_every: int = 1000) -> None:
        if ttl <= 0:
            raise InvalidInputError("ttl must be positive")
        self.ttl = ttl
        self.purge_every = purge_every
        self._claims = 0
        self._lock = threading.Lock()
        self._db = sqlite3.connect(str(path), timeout=30, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("CREATE TABLE IF NOT EXISTS deliveries (id TEXT PRIMARY KEY, expires REAL NOT NULL)")

    def claim(self, webhook_id: str, now: float) -> bool:
        with self._lock, self._transaction():
            self._db.execute("DELETE FROM deliveries WHERE id = ? AND expires <= ?", (webhook_id, now))
            inserted = self._db.execute(
                "INSERT OR IGNORE INTO deliveries (id, expires) VALUES (?, ?)", (webhook_id, now + self.ttl)
            ).rowcount
            self._claims += 1
            if self._claims % self.purge_every == 0:
                self._db.execute("DELETE FROM deliveries WHERE expires <= ?", (now,))
            return inserted == 1

    def release(self, webhook_id: str) -> None:
        with self._lock:
            self._db.execute("DELETE FROM deliveries WHERE id = ?", (webhook_id,))

    def close(self) -> None:
        self._db.close()

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        self._db.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            self._db.execute("ROLLBACK")
            raise
        self._db.execute("COMMIT")


# -- the two together --------------------------------------------------------------------------------


class Receiver:
    """:func:`verify`, then a claim of the execution id in ``deduplicator`` (None: no
    de-duplication). ``clock`` gives the time in Unix seconds (tests pass their own)."""

    def __init__(
        self,
        secrets: Secrets,
        deduplicator: Deduplicator | None = None,
        *,
        tolerance: float = DEFAULT_TOLERANCE_S,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.keys = keys(secrets)  # refused now, not at the first delivery
        self.deduplicator = deduplicator
        self.tolerance = tolerance
        self.clock = clock

    def verify(self, headers: Mapping[str, str], body: bytes) -> Delivery:
        """The verified, first-seen delivery (else :class:`InvalidSignature`,
        :class:`StaleTimestamp` or :class:`Duplicate`); :meth:`release` it if processing fails."""
        now = self.clock()
        delivery = verify(self.keys, headers, body, now=now, tolerance=self.tolerance)
        if self.deduplicator is not None and not self.deduplicator.claim(delivery.id, now):
            raise Duplicate(delivery.id)
        return delivery

    def release(self, delivery: Delivery) -> None:
        if self.deduplicator is not None:
            self.deduplicator.release(delivery.id)

    @contextmanager
    def receive(self, headers: Mapping[str, str], body: bytes) -> Iterator[Delivery]:
        """:meth:`verify` as a context: an exception in the block releases the id, so that the
        sender's retry is processed."""
        delivery = self.verify(headers, body)
        try:
            yield delivery
        except BaseException:
            self.release(delivery)
            raise


def wsgi_headers(environ: Mapping[str, object]) -> dict[str, str]:
    """The request headers of a WSGI ``environ`` (names in lower case, ``-`` for ``_``)."""
    return {
        key[5:].lower().replace("_", "-"): str(value)
        for key, value in environ.items()
        if key.startswith("HTTP_")
    }


def asgi_headers(scope: Mapping[str, object]) -> dict[str, str]:
    """The request headers of an ASGI HTTP ``scope`` (names in lower case)."""
    raw = scope.get("headers") or []
    assert isinstance(raw, Iterable)
    return {bytes(name).decode("latin-1").lower(): bytes(value).decode("latin-1") for name, value in raw}
