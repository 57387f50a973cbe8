"""A thin asyncio client for etcd's v3 JSON gateway: the :class:`~.etcd_api.EtcdApi` of the
coordinator.

etcd (3.4 and later) serves its gRPC API as JSON over HTTP under ``/v3/``: every call is a POST of
a JSON body, keys and values are base64, 64-bit integers travel as strings and fields at their
default value (0, false, PUT) are left out. Streaming calls (watch) answer with one JSON object
per line for as long as the connection stays open. An error answer is
``{"error": ..., "code": N, "message": ...}`` with N a gRPC status code, which is all the client
looks at to classify it (:func:`~.etcd_api.error_for`). See :mod:`cronwheel.coordinator.etcd`
for why cronwheel speaks this rather than gRPC.

All requests go through one :class:`aiohttp.ClientSession`. A request that cannot reach etcd (or
that etcd answers with a transient code) raises :class:`EtcdUnavailableError` and moves on to the
next endpoint for the following request; callers retry with backoff. Nothing is retried here
except once after a new token (below): a transaction whose answer was lost may or may not have
been applied, and only the caller can find out which (by reading the state back).

**https** endpoints are verified with the configured CA file (default: the system's trust store)
and present the configured client certificate, if any. A certificate that does not verify is
:class:`EtcdAuthError` (permanent: retrying cannot make it verify).

**Credentials.** With a user configured, the client authenticates (``/v3/auth/authenticate``)
before its first call and sends the token in the ``Authorization`` header. When etcd no longer
accepts the token (UNAUTHENTICATED: a simple token unused for five minutes, or dropped when the
user's password changed; or INVALID_ARGUMENT, which is how etcd says "revision of auth store is
old" after a change of users or roles) the client authenticates again, once, and repeats the
call: a refused call was not applied, so repeating it is safe. Neither the password nor the token
is ever put in an error or a log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
from collections.abc import AsyncGenerator, Sequence

import aiohttp

from cronwheel.coordinator.etcd_api import (
    Code,
    EtcdAuthError,
    EtcdConfig,
    EtcdRequestError,
    EtcdUnavailableError,
    Event,
    Json,
    KeyValue,
    LeaseNotFoundError,
    TxnResult,
    WatchBatch,
    b64,
    error_for,
    op_put,
    prefix_end,
)
from cronwheel.tls import ClientTls, tls_refused

_REAUTHENTICATE = frozenset({Code.UNAUTHENTICATED, Code.INVALID_ARGUMENT})


class EtcdClient:
    """etcd's KV, lease and watch calls over the JSON gateway, on one shared HTTP session."""

    def __init__(self, config: EtcdConfig, *, request_timeout_s: float = 2.0) -> None:
        self.config = config
        self.endpoints = [endpoint.rstrip("/") for endpoint in config.endpoints]
        self.request_timeout_s = request_timeout_s
        self._current = 0
        self._tls = _tls_context(config)
        self._session: aiohttp.ClientSession | None = None
        self._token: str | None = None
        self._authenticating = asyncio.Lock()

    @property
    def endpoint(self) -> str:
        return self.endpoints[self._current]

    def _rotate(self) -> None:
        self._current = (self._current + 1) % len(self.endpoints)

    def _http(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=64, enable_cleanup_closed=True, ssl=self._tls),
                json_serialize=json.dumps,
            )
        return self._session

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None

    # -- requests

    async def call(self, path: str, body: Json, *, timeout_s: float | None = None) -> Json:
        """POST ``body`` to ``/v3/{path}`` (authenticated, when a user is configured) and return
        the decoded answer."""
        token = await self._current_token()
        try:
            return await self._post(path, body, token, timeout_s)
        except EtcdRequestError as error:
            if token is None or error.code not in _REAUTHENTICATE:
                raise
        token = await self._authenticate(stale=token)
        try:
            return await self._post(path, body, token, timeout_s)
        except EtcdRequestError as error:
            if error.code == Code.UNAUTHENTICATED:  # the new token went too: etcd is in flux
                raise EtcdUnavailableError(f"etcd at {self.endpoint} refused a fresh token") from error
            raise

    async def _post(self, path: str, body: Json, token: str | None, timeout_s: float | None) -> Json:
        endpoint = self.endpoint
        timeout = aiohttp.ClientTimeout(total=timeout_s or self.request_timeout_s)
        headers = {"Authorization": token} if token else None
        try:
            async with self._http().post(
                f"{endpoint}/v3/{path}", json=body, timeout=timeout, headers=headers
            ) as response:
                text = await response.text()
                status = response.status
        except aiohttp.ClientConnectorCertificateError as error:
            raise _untrusted(endpoint, error) from error
        except (aiohttp.ClientError, OSError, TimeoutError) as error:
            if tls_refused(error):  # etcd refused our certificate (none, or not of its CA)
                raise EtcdAuthError(0, f"etcd at {endpoint} refused the TLS connection: {error}") from error
            self._rotate()
            raise EtcdUnavailableError(f"etcd at {endpoint} unreachable: {error!r}") from error
        try:
            data: Json = json.loads(text) if text else {}
        except ValueError as error:
            if 400 <= status < 500:  # the gateway's own refusals are plain text
                raise _refused(endpoint, status, text) from error
            self._rotate()
            raise EtcdUnavailableError(f"etcd at {endpoint} answered {status} with non-JSON") from error
        if status == 200 and "error" not in data:
            return data
        raise self._error(endpoint, status, data)

    def _error(self, endpoint: str, status: int, data: Json) -> Exception:
        code = int(data.get("code", 0)) or (Code.UNAVAILABLE if status >= 500 else 0)
        message = str(data.get("message") or data.get("error") or f"HTTP {status}")
        error = error_for(code, message)
        if isinstance(error, EtcdUnavailableError):
            self._rotate()
            return EtcdUnavailableError(f"etcd at {endpoint}: {message} (code {code})")
        return error

    # -- credentials

    async def _current_token(self) -> str | None:
        if self.config.user is None:
            return None
        return self._token or await self._authenticate(stale=None)

    async def _authenticate(self, stale: str | None) -> str:
        """A token for the configured user: the current one if another call already replaced
        ``stale``, else a new one (one authentication at a time, however many calls failed)."""
        async with self._authenticating:
            if self._token is not None and self._token != stale:
                return self._token
            self._token = None
            body = {"name": self.config.user, "password": self.config.password}
            try:
                data = await self._post("auth/authenticate", body, None, None)
            except EtcdRequestError as error:
                user = self.config.user
                message = f"etcd refused the credentials of user {user!r}: {error.etcd_message}"
                raise EtcdAuthError(error.code, message) from None
            token = str(data.get("token", ""))
            if not token:
                raise EtcdAuthError(0, "etcd answered the authentication without a token")
            self._token = token
            return token

    # -- KV

    async def range(self, key: str, range_end: bytes | None = None) -> tuple[int, list[KeyValue]]:
        body: Json = {"key": b64(key)}
        if range_end is not None:
            body["range_end"] = b64(range_end)
        data = await self.call("kv/range", body)
        kvs = [KeyValue.from_json(item) for item in data.get("kvs", [])]
        return int(data["header"]["revision"]), kvs

    async def get_prefix(self, prefix: str) -> tuple[int, list[KeyValue]]:
        return await self.range(prefix, prefix_end(prefix))

    async def put(self, key: str, value: bytes, lease: int = 0) -> int:
        data = await self.call("kv/put", op_put(key, value, lease)["request_put"])
        return int(data["header"]["revision"])

    async def txn(
        self, compare: Sequence[Json], success: Sequence[Json], failure: Sequence[Json] = ()
    ) -> TxnResult:
        body = {"compare": list(compare), "success": list(success), "failure": list(failure)}
        data = await self.call("kv/txn", body)
        return TxnResult(
            succeeded=bool(data.get("succeeded", False)),
            revision=int(data["header"]["revision"]),
            responses=tuple(data.get("responses", [])),
        )

    async def compact(self, revision: int) -> None:
        await self.call("kv/compaction", {"revision": str(revision), "physical": True})

    # -- leases

    async def grant(self, ttl_s: int) -> tuple[int, int]:
        data = await self.call("lease/grant", {"TTL": str(ttl_s)})
        return int(data["ID"]), int(data.get("TTL", ttl_s))

    async def keepalive(self, lease: int) -> int:
        data = await self.call("lease/keepalive", {"ID": str(lease)})
        return int(data.get("result", {}).get("TTL", 0))

    async def time_to_live(self, lease: int) -> tuple[int, int]:
        data = await self.call("lease/timetolive", {"ID": str(lease)})
        return int(data.get("TTL", -1)), int(data.get("grantedTTL", 0))

    async def revoke(self, lease: int) -> None:
        with contextlib.suppress(LeaseNotFoundError):
            await self.call("lease/revoke", {"ID": str(lease)})

    # -- watch

    async def watch(self, key: str, range_end: bytes, start_revision: int) -> AsyncGenerator[WatchBatch]:
        """See :meth:`~.etcd_api.EtcdApi.watch`. A watch etcd refuses (a token it no longer
        accepts, a missing permission) comes back cancelled; the caller's next read then meets
        the same refusal as an error and, for a token, authenticates again."""
        endpoint = self.endpoint
        body = {
            "create_request": {
                "key": b64(key),
                "range_end": b64(range_end),
                "start_revision": str(start_revision),
            }
        }
        token = await self._current_token()
        headers = {"Authorization": token} if token else None
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=self.request_timeout_s, sock_read=None)
        try:
            async with self._http().post(
                f"{endpoint}/v3/watch", json=body, timeout=timeout, headers=headers
            ) as response:
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
        except aiohttp.ClientConnectorCertificateError as error:
            raise _untrusted(endpoint, error) from error
        except (aiohttp.ClientError, OSError, TimeoutError, ValueError) as error:
            self._rotate()
            raise EtcdUnavailableError(f"etcd watch at {endpoint} broke: {error!r}") from error
        self._rotate()
        raise EtcdUnavailableError(f"etcd watch at {endpoint} ended")


def _tls_context(config: EtcdConfig) -> ssl.SSLContext | bool:
    """The TLS context of https endpoints (``True``: aiohttp's default, for http ones, unused).
    Files that cannot be used are refused here, at start, naming the file and the URL parameter
    (:class:`~cronwheel.tls.TlsConfigError`), rather than retried as an outage."""
    if not config.tls:
        return True
    names = ("coordinator URL cacert", "coordinator URL cert", "coordinator URL key")
    return ClientTls(config.ca_file, config.cert_file, config.key_file, names=names).context()


def _refused(endpoint: str, status: int, text: str) -> EtcdAuthError:
    """A plain-text 4xx of etcd's gateway: a request it will never take, whoever retries it."""
    reason = text.strip().split("\n", 1)[0][:200]
    hint = ""
    if "CommonName" in reason:  # etcd with --client-cert-auth and authentication on
        hint = (
            ": with authentication on, etcd's gateway takes no client certificate with a CommonName; "
            "issue cronwheel's without one (a subjectAltName only)"
        )
    return EtcdAuthError(0, f"etcd at {endpoint} refused the request ({status}: {reason}){hint}")


def _untrusted(endpoint: str, error: aiohttp.ClientConnectorCertificateError) -> EtcdAuthError:
    return EtcdAuthError(0, f"the certificate of etcd at {endpoint} does not verify: {error}")


def _watch_batch(message: Json) -> WatchBatch:
    if "error" in message:
        error = message["error"]
        detail = error.get("message", error) if isinstance(error, dict) else error
        raise EtcdUnavailableError(f"etcd watch error: {detail}")
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
