"""The etcd calls the coordinator makes, as a protocol (:class:`EtcdApi`), with their records,
errors and transaction building blocks.

:class:`cronwheel.coordinator.etcd.EtcdCoordinator` depends on this module only;
:class:`cronwheel.coordinator.etcd_client.EtcdClient` implements it over etcd's v3 JSON gateway.
The protocol is the seven calls the coordinator needs (range, put, txn; lease grant, keepalive,
revoke, time-to-live; watch) and nothing else, so that what the coordinator relies on is written
down in one screen and a client is easy to check against it (``tests/coordinator/test_client.py``).

Errors say whether a retry can help (:mod:`cronwheel.errors`): :class:`EtcdUnavailableError` is
transient, :class:`EtcdRequestError` permanent, except :class:`LeaseNotFoundError`, a state the
coordinator handles (its lease expired: it joins again). etcd's answers carry a gRPC status code,
and the client maps codes, never message texts, to these classes (:func:`error_for`).
"""

from __future__ import annotations

import base64
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any, Literal, Protocol

from cronwheel.errors import BackendUnavailableError, PermanentError

Json = dict[str, Any]


class Code(IntEnum):
    """The gRPC status codes etcd answers with (the ``code`` of the gateway's error bodies)."""

    OK = 0
    CANCELLED = 1
    UNKNOWN = 2
    INVALID_ARGUMENT = 3  # also "authentication failed" and "revision of auth store is old"
    DEADLINE_EXCEEDED = 4
    NOT_FOUND = 5  # "requested lease not found" (member not found is not a call we make)
    ALREADY_EXISTS = 6
    PERMISSION_DENIED = 7
    RESOURCE_EXHAUSTED = 8  # "too many requests", "database space exceeded"
    FAILED_PRECONDITION = 9  # "authentication is not enabled", "not leader" (leader moves only)
    ABORTED = 10
    OUT_OF_RANGE = 11  # "too large lease TTL", "required revision has been compacted"
    UNIMPLEMENTED = 12
    INTERNAL = 13
    UNAVAILABLE = 14  # "no leader", "leader changed", "request timed out", "server stopped"
    DATA_LOSS = 15
    UNAUTHENTICATED = 16  # "invalid auth token": the token expired or etcd forgot it


# Codes that mean "try again later": etcd is electing a leader, overloaded or restarting.
TRANSIENT_CODES = frozenset(
    {
        Code.CANCELLED,
        Code.UNKNOWN,
        Code.DEADLINE_EXCEEDED,
        Code.RESOURCE_EXHAUSTED,
        Code.ABORTED,
        Code.INTERNAL,
        Code.UNAVAILABLE,
    }
)


class EtcdUnavailableError(BackendUnavailableError):
    """etcd could not be reached, timed out or is without a leader right now."""


class EtcdRequestError(PermanentError):
    """etcd refused the request (a bug in the request, refused credentials or permissions, or a
    state the caller must handle)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"etcd refused the request: {message} (code {code})")
        self.code = code
        self.etcd_message = message


class LeaseNotFoundError(EtcdRequestError):
    """The lease named in the request does not exist (it expired or was revoked)."""


class EtcdAuthError(EtcdRequestError):
    """etcd refused this client's credentials (wrong user or password, auth not enabled) or TLS
    certificate: retrying cannot help, the configuration must change."""


def error_for(code: int, message: str) -> EtcdRequestError | EtcdUnavailableError:
    """The error of an answer with gRPC status ``code`` (``message`` only goes into the text)."""
    if code in TRANSIENT_CODES:
        return EtcdUnavailableError(f"{message} (code {code})")
    if code == Code.NOT_FOUND:
        return LeaseNotFoundError(code, message)
    return EtcdRequestError(code, message)


# -- where and how to reach etcd --------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class EtcdConfig:
    """How to reach an etcd cluster: its client URLs (all ``http://`` or all ``https://``), the
    user to authenticate as (etcd's auth API, when ``user`` is set), and for https the CA file to
    verify the servers with (default: the system's trust store) and an optional client
    certificate and key. Parsed from the coordinator URL by :func:`cronwheel.node.backends.etcd_config`.
    The password never appears in ``repr()`` or in a log line."""

    endpoints: tuple[str, ...]
    user: str | None = None
    password: str = field(default="", repr=False)
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    def __post_init__(self) -> None:
        if not self.endpoints:
            raise ValueError("etcd needs at least one endpoint")
        schemes = {endpoint.split("://", 1)[0] for endpoint in self.endpoints}
        if not schemes <= {"http", "https"} or len(schemes) != 1:
            raise ValueError("etcd endpoints are all http:// or all https:// URLs")

    @property
    def tls(self) -> bool:
        return self.endpoints[0].startswith("https://")


# -- records --------------------------------------------------------------------------------


def b64(text: str | bytes) -> str:
    """``text`` (UTF-8) or bytes as the gateway wants them: base64."""
    raw = text.encode() if isinstance(text, str) else text
    return base64.b64encode(raw).decode("ascii")


def _unb64(text: str | None) -> bytes:
    return base64.b64decode(text) if text else b""


def prefix_end(prefix: str) -> bytes:
    """The ``range_end`` that makes a range cover every key starting with ``prefix``."""
    raw = prefix.encode()
    for index in range(len(raw) - 1, -1, -1):
        if raw[index] < 0xFF:
            return raw[:index] + bytes([raw[index] + 1])
    return b"\0"  # every key


@dataclass(frozen=True, slots=True)
class KeyValue:
    key: str
    value: bytes
    create_revision: int
    mod_revision: int
    lease: int

    @classmethod
    def from_json(cls, data: Json) -> KeyValue:
        return cls(
            key=_unb64(data.get("key")).decode(),
            value=_unb64(data.get("value")),
            create_revision=int(data.get("create_revision", 0)),
            mod_revision=int(data.get("mod_revision", 0)),
            lease=int(data.get("lease", 0)),
        )


@dataclass(frozen=True, slots=True)
class Event:
    type: Literal["PUT", "DELETE"]
    kv: KeyValue


@dataclass(frozen=True, slots=True)
class WatchBatch:
    """One message of a watch stream."""

    revision: int  # the header revision
    events: tuple[Event, ...]
    created: bool = False
    canceled: bool = False
    compact_revision: int = 0  # set when the start revision was compacted away
    reason: str = ""


@dataclass(frozen=True, slots=True)
class TxnResult:
    succeeded: bool
    revision: int  # the store revision after the transaction (the new one when it wrote)
    responses: tuple[Json, ...]

    def ranged(self) -> list[KeyValue]:
        """The key-values returned by the range operations of the branch that ran."""
        found: list[KeyValue] = []
        for response in self.responses:
            for kv in response.get("response_range", {}).get("kvs", []):
                found.append(KeyValue.from_json(kv))
        return found


# -- transaction building blocks ---------------------------------------------------------------


def cmp_create(key: str, revision: int) -> Json:
    """True when ``key`` was created at ``revision`` (0: the key does not exist)."""
    return {"target": "CREATE", "result": "EQUAL", "key": b64(key), "create_revision": str(revision)}


def cmp_mod(key: str, revision: int) -> Json:
    """True when ``key`` was last written at ``revision`` (0: the key does not exist)."""
    return {"target": "MOD", "result": "EQUAL", "key": b64(key), "mod_revision": str(revision)}


def cmp_lease(key: str, lease: int) -> Json:
    """True when ``key`` is attached to ``lease`` (0: no lease, or no key)."""
    return {"target": "LEASE", "result": "EQUAL", "key": b64(key), "lease": str(lease)}


def op_put(key: str, value: bytes, lease: int = 0) -> Json:
    body: Json = {"key": b64(key), "value": b64(value)}
    if lease:
        body["lease"] = str(lease)
    return {"request_put": body}


def op_delete(key: str) -> Json:
    return {"request_delete_range": {"key": b64(key)}}


def op_get(key: str) -> Json:
    return {"request_range": {"key": b64(key)}}


# -- the protocol ---------------------------------------------------------------------------------


class EtcdApi(Protocol):
    """The etcd calls of the coordinator. Every call raises :class:`EtcdUnavailableError` when
    etcd cannot answer now, :class:`LeaseNotFoundError` when it names a lease etcd does not know
    (except ``keepalive``, ``time_to_live`` and ``revoke``, which say so in their answer) and
    another :class:`EtcdRequestError` when etcd refuses it."""

    async def range(self, key: str, range_end: bytes | None = None) -> tuple[int, list[KeyValue]]:
        """The keys in ``[key, range_end)`` (just ``key`` without ``range_end``), and the
        revision they were read at."""
        ...

    async def put(self, key: str, value: bytes, lease: int = 0) -> int:
        """Write ``key`` (attached to ``lease``, if any); the revision of the write."""
        ...

    async def txn(
        self, compare: Sequence[Json], success: Sequence[Json], failure: Sequence[Json] = ()
    ) -> TxnResult:
        """Run ``success`` if every comparison holds, else ``failure``, atomically."""
        ...

    async def grant(self, ttl_s: int) -> tuple[int, int]:
        """A new lease: ``(id, granted TTL)``; etcd may grant more than asked (its minimum)."""
        ...

    async def keepalive(self, lease: int) -> int:
        """Renew ``lease``; its TTL, 0 when the lease no longer exists."""
        ...

    async def revoke(self, lease: int) -> None:
        """Revoke ``lease`` (deleting every key attached to it); a lease already gone is fine."""
        ...

    async def time_to_live(self, lease: int) -> tuple[int, int]:
        """``(remaining TTL, granted TTL)`` of ``lease`` in whole seconds; remaining is -1 when
        the lease no longer exists."""
        ...

    def watch(self, key: str, range_end: bytes, start_revision: int) -> AsyncGenerator[WatchBatch]:
        """The changes to ``[key, range_end)`` from ``start_revision`` on, batch by batch, until
        the stream breaks (:class:`EtcdUnavailableError`) or etcd cancels it (a batch with
        ``canceled``: the start revision was compacted, or the watch was refused). Events of one
        revision always arrive in one batch."""
        ...

    async def close(self) -> None:
        """Release the connections; the client is not used afterwards."""
        ...
