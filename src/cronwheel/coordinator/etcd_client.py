"""A thin asyncio client for etcd's v3 JSON gateway: exactly the calls the coordinator makes.

etcd (3.4 and later) serves its gRPC API as JSON over HTTP under ``/v3/``: every call is a POST of
a JSON body, keys and values are base64, 64-bit integers travel as strings and fields at their
default value (0, false, PUT) are left out. Streaming calls (watch) answer with one JSON object
per line for as long as the connection stays open. See :mod:`cronwheel.coordinator.etcd` for why
cronwheel speaks this rather than gRPC.

All requests go through one :class:`aiohttp.ClientSession`. A request that cannot reach etcd (or
that etcd answers with "unavailable") raises :class:`EtcdUnavailableError` and moves on to the
next endpoint for the following request; callers retry with backoff. Nothing is retried here:
a transaction whose answer was lost may or may not have been applied, and only the caller can
find out which (by reading the state back).
"""

from __future__ import annotations

import base64
import contextlib
import json
import logging
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp

from cronwheel.errors import BackendUnavailableError, PermanentError

log = logging.getLogger("cronwheel.coordinator.etcd")

Json = dict[str, Any]

# gRPC status codes that mean "try again later" (UNKNOWN covers "leader changed" and friends).
_TRANSIENT_CODES = frozenset({1, 2, 4, 8, 10, 13, 14})


class EtcdUnavailableError(BackendUnavailableError):
    """etcd could not be reached, timed out or is without a leader right now."""


class EtcdRequestError(PermanentError):
    """etcd refused the request (a bug in the request, or a state the caller must handle)."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(f"etcd refused the request: {message} (code {code})")
        self.code = code
        self.etcd_message = message


class LeaseNotFoundError(EtcdRequestError):
    """The lease named in the request does not exist (it expired or was revoked)."""


def _b64(text: str | bytes) -> str:
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
    return {"target": "CREATE", "result": "EQUAL", "key": _b64(key), "create_revision": str(revision)}


def cmp_mod(key: str, revision: int) -> Json:
    """True when ``key`` was last written at ``revision`` (0: the key does not exist)."""
    return {"target": "MOD", "result": "EQUAL", "key": _b64(key), "mod_revision": str(revision)}


def cmp_lease(key: str, lease: int) -> Json:
    """True when ``key`` is attached to ``lease`` (0: no lease, or no key)."""
    return {"target": "LEASE", "result": "EQUAL", "key": _b64(key), "lease": str(lease)}


def op_put(key: str, value: bytes, lease: int = 0) -> Json:
    body: Json = {"key": _b64(key), "value": _b64(value)}
    if lease:
        body["lease"] = str(lease)
    return {"request_put": body}


def op_delete(key: str) -> Json:
    return {"request_delete_range": {"key": _b64(key)}}


def op_get(key: str) -> Json:
    return {"request_range": {"key": _b64(key)}}


# -- the client ---------------------------------------------------------------------------------


class EtcdClient:
    """etcd's KV, lease and watch calls over the JSON gateway, on one shared HTTP session."""

    def __init__(self, endpoints: Sequence[str], *, request_timeout_s: float = 2.0) -> None:
        if not endpoints:
            raise ValueError("etcd needs at least one endpoint")
        self.endpoints = [endpoint.rstrip("/") for endpoint in endpoints]
        self.request_timeout_s = request_timeout_s
        self._current = 0
        self._session: aiohttp.ClientSession | None = None

    @property
    def endpoint(self) -> str:
        return self.endpoints[self._current]

    def _rotate(self) -> None:
        self._current = (self._current + 1) % len(self.endpoints)

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=64, enable_cleanup_closed=True),
                json_serialize=json.dumps,
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    async def call(self, path: str, body: Json, *, timeout_s: float | None = None) -> Json:
        """POST ``body`` to ``/v3/{path}`` and return the decoded answer."""
        endpoint = self.endpoint
        timeout = aiohttp.ClientTimeout(total=timeout_s or self.request_timeout_s)
        try:
            async with self._http().post(f"{endpoint}/v3/{path}", json=body, timeout=timeout) as response:
                text = await response.text()
                status = response.status
        except (aiohttp.ClientError, OSError, TimeoutError) as error:
            self._rotate()
            raise EtcdUnavailableError(f"etcd at {endpoint} unreachable: {error!r}") from error
        try:
            data: Json = json.loads(text) if text else {}
        except ValueError as error:
            self._rotate()
            raise EtcdUnavailableError(f"etcd at {endpoint} answered {status} with non-JSON") from error
        if status == 200 and "error" not in data:
            return data
        raise self._error(endpoint, status, data)

    def _error(self, endpoint: str, status: int, data: Json) -> Exception:
        code = int(data.get("code", 0))
        message = str(data.get("message") or data.get("error") or f"HTTP {status}")
        if "lease not found" in message:
            return LeaseNotFoundError(code, message)
        if code in _TRANSIENT_CODES or status >= 500:
            self._rotate()
            return EtcdUnavailableError(f"etcd at {endpoint}: {message} (code {code})")
        return EtcdRequestError(code, message)

    # -- KV

    async def range(self, key: str, range_end: bytes | None = None) -> tuple[int, list[KeyValue]]:
        """The keys in ``[key, range_end)`` (just ``key`` without ``range_end``), and the revision
        they were read at."""
        body: Json = {"key": _b64(key)}
        if range_end is not None:
            body["range_end"] = _b64(range_end)
        data = await self.call("kv/range", body)
        kvs = [KeyValue.from_json(item) for item in data.get("kvs", [])]
        return int(data["header"]["revision"]), kvs

    async def get_prefix(self, prefix: str) -> tuple[int, list[KeyValue]]:
        return await self.range(prefix, prefix_end(prefix))

    async def put(self, key: str, value: bytes, lease: int = 0) -> int:
        data = await self.call("kv/put", op_put(key, value, lease)["request_put"])
        return int(data["header"]["revision"])

    async def txn(
        self, compare: list[Json], success: list[Json], failure: list[Json] | None = None
    ) -> TxnResult:
        data = await self.call("kv/txn", {"compare": compare, "success": success, "failure": failure or []})
        return TxnResult(
            succeeded=bool(data.get("succeeded", False)),
            revision=int(data["header"]["revision"]),
            responses=tuple(data.get("responses", [])),
        )

    async def compact(self, revision: int) -> None:
        await self.call("kv/compaction", {"revision": str(revision), "physical": True})

    # -- leases

    async def grant(self, ttl_s: int) -> tuple[int, int]:
        """A new lease: ``(id, granted TTL)``; etcd may grant more than asked (its minimum TTL)."""
        data = await self.call("lease/grant", {"TTL": str(ttl_s)})
        return int(data["ID"]), int(data.get("TTL", ttl_s))

    async def keepalive(self, lease: int) -> int:
        """Renew ``lease``; its TTL, 0 when the lease no longer exists."""
        data = await self.call("lease/keepalive", {"ID": str(lease)})
        return int(data.get("result", {}).get("TTL", 0))

    async def time_to_live(self, lease: int) -> tuple[int, int]:
        """``(remaining TTL, granted TTL)`` of ``lease`` in whole seconds; remaining is -1 when
        the lease no longer exists."""
        data = await self.call("lease/timetolive", {"ID": str(lease)})
        return int(data.get("TTL", -1)), int(data.get("grantedTTL", 0))

    async def revoke(self, lease: int) -> None:
        """Revoke ``lease`` (deleting every key attached to it); a lease already gone is fine."""
        with contextlib.suppress(LeaseNotFoundError):
            await self.call("lease/revoke", {"ID": str(lease)})

    # -- watch

    async def watch(self, key: str, range_end: bytes, start_revision: int) -> AsyncGenerator[WatchBatch]:
        """The changes to ``[key, range_end)`` from ``start_revision`` on, batch by batch, until the
        stream breaks (:class:`EtcdUnavailableError`) or etcd cancels it (a batch with
        ``canceled``). Events of one revision always arrive in one batch."""
        endpoint = self.endpoint
        body = {
            "create_request": {
                "key": _b64(key),
                "range_end": _b64(range_end),
                "start_revision": str(start_revision),
            }
        }
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.request_timeout_s, sock_read=None)
        try:
            async with self._http().post(f"{endpoint}/v3/watch", json=body, timeout=timeout) as response:
                if response.status != 200:
                    data = json.loads(await response.text() or "{}")
                    raise self._error(endpoint, response.status, data)
                buffer = b""
                async for chunk in response.content.iter_any():
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        if line.strip():
                            yield _watch_batch(json.loads(line))
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as error:
            self._rotate()
            raise EtcdUnavailableError(f"etcd watch at {endpoint} broke: {error!r}") from error
        self._rotate()
        raise EtcdUnavailableError(f"etcd watch at {endpoint} ended")


def _watch_batch(message: Json) -> WatchBatch:
    if "error" in message:
        error = message["error"]
        raise EtcdUnavailableError(f"etcd watch error: {error.get('message', error)}")
    result: Json = message.get("result", {})
    events = tuple(
        Event("DELETE" if item.get("type") == "DELETE" else "PUT", KeyValue.from_json(item.get("kv", {})))
        for item in result.get("events", [])
    )
    return WatchBatch(
        revision=int(result.get("header", {}).get("revision", 0)),
        events=events,
        created=bool(result.get("created", False)),
        canceled=bool(result.get("canceled", False)),
        compact_revision=int(result.get("compact_revision", 0)),
        reason=str(result.get("cancel_reason", "")),
    )
