"""The webhook executor's HTTP/1.1 client: a keep-alive pool of guarded connections.

A webhook attempt is one small request and the start of its response, so the client is made for
exactly that, and costs a third of a general client's CPU per request: the request's head is
written in one piece, the response is parsed by ``httptools`` (llhttp, Node.js' parser, in C), and
an idle connection waits in its endpoint's pool for the next attempt. One request at a time per
connection (no pipelining); redirects are never followed; no proxy, no cookies, no compression
asked for.

**The SSRF guard** holds at the two points it always did: a host name is resolved by the guarded
resolver (an answer holding a refused address is refused whole), and each socket is created by
the guarded socket factory for the very address it then connects to, so an IP literal and a
changed DNS answer are checked too (:mod:`cronwheel.worker.executors.http`).

**What is kept of a response**: its status, its headers and up to ``limit`` bytes of its body. A
body longer than that is not read further, and its connection is closed rather than reused.
A connection the server closes, or that sat idle for ``keepalive_s``, is never used again; a
request that meets a reused connection closed before any byte of the answer came is sent once
more on a new one (the delivery is at least once, with its idempotency key, either way).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import socket
import ssl
from collections.abc import Sequence
from dataclasses import dataclass, field
from ipaddress import ip_address

import httptools
from aiohappyeyeballs import SocketFactoryType
from aiohttp.abc import AbstractResolver, ResolveResult
from yarl import URL

MAX_HEAD_BYTES = 65_536  # a response's status line and headers, together, at most


class WireError(Exception):
    """A request that got no usable response; :func:`describe` in the executor says why."""


class ResolveError(WireError):
    def __init__(self, host: str, error: OSError) -> None:
        super().__init__(host, error)
        self.host = host
        self.error = error


class ConnectError(WireError):
    def __init__(self, error: OSError) -> None:
        super().__init__(error)
        self.error = error


class DisconnectedError(WireError):
    """The server closed the connection before the response's head was complete."""


class InvalidResponseError(WireError):
    """The server's answer is not an HTTP/1.x response head (or one too large)."""


class InvalidRequestError(WireError):
    """The request cannot be written as asked (never sent)."""


@dataclass(slots=True)
class Response:
    status: int
    headers: list[tuple[str, str]]
    body: bytes  # at most the request's limit

    def header(self, name: str) -> str | None:
        wanted = name.lower()
        return next((value for key, value in self.headers if key.lower() == wanted), None)


class _Connection(asyncio.Protocol):
    """One connection and the response it is reading (one at a time)."""

    def __init__(self, pool: _Endpoint) -> None:
        self.endpoint = pool
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.idle_since = 0.0
        self._parser = httptools.HttpResponseParser(self)
        self._waiter: asyncio.Future[None] | None = None
        self._reset(0, head=False)

    def _reset(self, limit: int, *, head: bool) -> None:
        self._limit = limit
        self._head_only = head  # a HEAD request: the response has no body, whatever it says
        self._headers: list[tuple[str, str]] = []
        self._head_bytes = 0
        self._body = bytearray()
        self._status = 0
        self._received = False  # any byte of the answer
        self._headers_done = False
        self._complete = False  # the whole message was read: the connection may be reused

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self._received = True
        if self._waiter is None or self._waiter.done():
            self.close()  # bytes nobody asked for: this connection cannot be trusted again
            return
        try:
            self._parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self._fail(InvalidResponseError("a protocol upgrade"))
        except httptools.HttpParserError as error:
            self._fail(InvalidResponseError(str(error) or type(error).__name__))

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.endpoint.forget(self)
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if self._headers_done:  # read until closed, or cut short: the status is the verdict
            waiter.set_result(None)
        else:
            waiter.set_exception(DisconnectedError())

    # -- httptools callbacks -------------------------------------------------------------------

    def on_header(self, name: bytes, value: bytes) -> None:
        self._head_bytes += len(name) + len(value) + 4
        if self._head_bytes > MAX_HEAD_BYTES:
            raise httptools.HttpParserError(f"headers longer than {MAX_HEAD_BYTES} bytes")
        self._headers.append((name.decode("latin-1"), value.decode("latin-1")))

    def on_headers_complete(self) -> None:
        status = self._parser.get_status_code()
        if status < 200:  # 100 Continue, 103 Early Hints: the answer is still to come
            self._headers = []
            return
        self._status, self._headers_done = status, True
        if self._head_only:
            self._finish(reusable=False)

    def on_body(self, body: bytes) -> None:
        if not self._headers_done or self._waiter is None or self._waiter.done():
            return
        room = self._limit - len(self._body)
        self._body += body[:room]
        if len(body) >= room and len(self._body) >= self._limit:
            self._finish(reusable=False)  # enough: the rest is never read

    def on_message_complete(self) -> None:
        if self._headers_done:
            self._finish(reusable=self._parser.should_keep_alive())

    # -- the request ---------------------------------------------------------------------------

    def _finish(self, *, reusable: bool) -> None:
        if self._waiter is not None and not self._waiter.done():  # the first verdict stands
            self._complete = reusable
            self._waiter.set_result(None)

    def _fail(self, error: Exception) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(error)
        self.close()

    async def exchange(self, head: bytes, body: bytes | None, limit: int, *, head_only: bool) -> Response:
        assert self.transport is not None
        self._reset(limit, head=head_only)  # the parser goes on from the message before
        self._waiter = asyncio.get_running_loop().create_future()
        self.transport.write(head if body is None else head + body)
        try:
            await self._waiter
        finally:
            self._waiter = None
        return Response(self._status, self._headers, bytes(self._body))

    @property
    def reusable(self) -> bool:
        return self._complete and not self.closed

    @property
    def answered(self) -> bool:
        return self._received

    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self.endpoint.forget(self)
            if self.transport is not None:
                self.transport.close()


@dataclass(eq=False)
class _Endpoint:
    """The connections to one (scheme, host, port): the idle ones, and a bound on them all."""

    slots: asyncio.Semaphore
    idle: list[_Connection] = field(default_factory=list)
    open: set[_Connection] = field(default_factory=set)
    busy: int = 0  # requests in flight, or waiting for a slot
    live: bool = True  # False once the pool forgot it: its connections are not kept

    def forget(self, connection: _Connection) -> None:
        self.open.discard(connection)
        with contextlib.suppress(ValueError):
            self.idle.remove(connection)


class HttpPool:
    """Connections kept alive per endpoint, opened through the guarded resolver and sockets."""

    def __init__(
        self,
        resolver: AbstractResolver,
        socket_factory: SocketFactoryType,
        *,
        limit: int = 512,
        limit_per_host: int = 64,
        keepalive_s: float = 30.0,
        dns_ttl_s: float = 30.0,
        ssl_context: ssl.SSLContext | None = None,
    ) -> None:
        self._resolver = resolver
        self._socket_factory = socket_factory
        self._slots = asyncio.Semaphore(limit)
        self._per_host = limit_per_host
        self._keepalive_s = keepalive_s
        self._dns_ttl_s = dns_ttl_s
        self._ssl = ssl_context
        self._endpoints: dict[tuple[str, str, int], _Endpoint] = {}
        self._dns: dict[tuple[str, int], tuple[float, list[ResolveResult]]] = {}
        self._swept_at = 0.0

    async def request(
        self, method: str, url: URL, headers: Sequence[tuple[str, str]], body: bytes | None, limit: int
    ) -> tuple[Response, tuple[tuple[str, str], ...]]:
        """Send one request; returns the response and the headers it was sent with, in order."""
        sent = _head_lines(method, url, headers, body)
        head = _head_bytes(method, url, sent)
        endpoint = self._endpoint(url)
        endpoint.busy += 1
        try:
            async with self._slots, endpoint.slots:
                return await self._send(endpoint, url, method, head, body, limit), tuple(sent)
        finally:
            endpoint.busy -= 1

    async def _send(
        self, endpoint: _Endpoint, url: URL, method: str, head: bytes, body: bytes | None, limit: int
    ) -> Response:
        for second_turn in (False, True):
            connection = None if second_turn else self._idle(endpoint)
            fresh = connection is None
            if connection is None:
                connection = await self._connect(endpoint, url)
            try:
                response = await connection.exchange(head, body, limit, head_only=method == "HEAD")
            except DisconnectedError:
                connection.close()
                if fresh or connection.answered:
                    raise
                continue  # a kept connection the server had closed: once more, on a new one
            except BaseException:
                connection.close()
                raise
            self._release(endpoint, connection)
            return response
        raise AssertionError("unreachable: the second turn is on a new connection")

    def clear_dns_cache(self) -> None:
        self._dns.clear()

    async def close(self) -> None:
        for endpoint in self._endpoints.values():
            endpoint.live = False
            for connection in list(endpoint.open):
                connection.close()
        self._endpoints.clear()
        self._dns.clear()

    # -- connections ---------------------------------------------------------------------------

    def _endpoint(self, url: URL) -> _Endpoint:
        key = (url.scheme, url.raw_host or "", url.port or 0)
        endpoint = self._endpoints.get(key)
        if endpoint is None:
            endpoint = self._endpoints[key] = _Endpoint(asyncio.Semaphore(self._per_host))
        return endpoint

    def _idle(self, endpoint: _Endpoint) -> _Connection | None:
        now = asyncio.get_running_loop().time()
        if now - self._swept_at > self._keepalive_s:
            self._sweep(now)
        while endpoint.idle:
            connection = endpoint.idle.pop()
            if not connection.closed and now - connection.idle_since < self._keepalive_s:
                return connection
            connection.close()
        return None

    def _sweep(self, now: float) -> None:
        """Close the connections idle for too long, of every endpoint; forget empty endpoints
        and DNS answers past their time."""
        self._swept_at = now
        for name, (at, _) in list(self._dns.items()):
            if now - at >= self._dns_ttl_s:
                del self._dns[name]
        for key, endpoint in list(self._endpoints.items()):
            for connection in [c for c in endpoint.idle if now - c.idle_since >= self._keepalive_s]:
                connection.close()
            if not endpoint.open and not endpoint.busy:
                endpoint.live = False
                del self._endpoints[key]

    def _release(self, endpoint: _Endpoint, connection: _Connection) -> None:
        if connection.reusable and endpoint.live:
            connection.idle_since = asyncio.get_running_loop().time()
            endpoint.idle.append(connection)
        else:
            connection.close()

    async def _connect(self, endpoint: _Endpoint, url: URL) -> _Connection:
        host, port = url.raw_host or "", url.port or (443 if url.scheme == "https" else 80)
        loop = asyncio.get_running_loop()
        last: OSError | None = None
        for family, address in await self._addresses(host, port):
            # the guard: refuses (BlockedAddressError) before a socket exists for a refused address
            sock = self._socket_factory((family, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, port)))
            try:
                sock.setblocking(False)
                await loop.sock_connect(sock, (address, port))
                _, connection = await loop.create_connection(
                    lambda: _Connection(endpoint),
                    sock=sock,
                    ssl=self._tls() if url.scheme == "https" else None,
                    server_hostname=host if url.scheme == "https" else None,
                )
            except OSError as error:  # ssl.SSLError and certificate errors too
                sock.close()
                last = error
                continue
            except BaseException:
                sock.close()
                raise
            endpoint.open.add(connection)
            return connection
        failed = last or OSError("no address to connect to")
        raise ConnectError(failed) from failed

    async def _addresses(self, host: str, port: int) -> list[tuple[int, str]]:
        """(family, address) to try in turn: an IP literal as itself, a name as the guarded
        resolver answers it (kept ``dns_ttl_s``: the answer was checked before it was kept)."""
        literal = _literal(host)
        if literal is not None:
            return [literal]
        now = asyncio.get_running_loop().time()
        cached = self._dns.get((host, port))
        if cached is not None and now - cached[0] < self._dns_ttl_s:
            answers = cached[1]
        else:
            try:  # the guarded resolver: an answer with a refused address raises BlockedAddressError
                answers = await self._resolver.resolve(host, port, socket.AF_UNSPEC)
            except OSError as error:
                raise ResolveError(host, error) from error
            self._dns[(host, port)] = (now, answers)
        return [(int(answer["family"]), str(answer["host"])) for answer in answers]

    def _tls(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return self._ssl


def _literal(host: str) -> tuple[int, str] | None:
    try:
        address = ip_address(host.strip("[]"))
    except ValueError:
        return None
    return (socket.AF_INET6 if address.version == 6 else socket.AF_INET, str(address))


def _head_lines(
    method: str, url: URL, headers: Sequence[tuple[str, str]], body: bytes | None
) -> list[tuple[str, str]]:
    """Every header the request is sent with, in order: Host first, the body's length last."""
    lines = [("Host", _host_header(url)), *_user_info(url), *headers]
    if body is not None or method in ("POST", "PUT", "PATCH"):
        lines.append(("Content-Length", str(0 if body is None else len(body))))
    return lines


def _head_bytes(method: str, url: URL, lines: Sequence[tuple[str, str]]) -> bytes:
    """The request line and headers as sent. The target's rules refuse line breaks in names and
    values before this; checked again here, where a smuggled line would take effect."""
    parts = [method, url.raw_path_qs or "/", *(text for line in lines for text in line)]
    if any("\r" in part or "\n" in part for part in parts):
        raise InvalidRequestError("a header or the path holds a line break")
    text = f"{method} {parts[1]} HTTP/1.1\r\n" + "".join(f"{n}: {v}\r\n" for n, v in lines)
    return (text + "\r\n").encode("utf-8")


def _user_info(url: URL) -> list[tuple[str, str]]:
    """User info in the URL is sent as Basic credentials (RFC 7617), as browsers and curl do; the
    target's rules refuse a URL with user info beside an ``Authorization`` header of its own."""
    if url.raw_user is None:
        return []
    pair = f"{url.user or ''}:{url.password or ''}"
    try:
        raw = pair.encode("latin-1")
    except UnicodeEncodeError:
        raw = pair.encode("utf-8")
    return [("Authorization", "Basic " + base64.b64encode(raw).decode("ascii"))]


def _host_header(url: URL) -> str:
    host = url.raw_host or ""
    if ":" in host:
        host = f"[{host}]"
    default = 443 if url.scheme == "https" else 80
    return host if url.port in (None, default) else f"{host}:{url.port}"
