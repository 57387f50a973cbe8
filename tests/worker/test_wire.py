"""The webhook client (``worker/executors/wire.py``) against raw servers on 127.0.0.1 that answer
exactly the bytes each test writes: keep-alive and its limits, bodies cut at the limit, chunked
and read-until-closed bodies, interim answers, broken answers, and TLS."""

from __future__ import annotations

import asyncio
import datetime
import ipaddress
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import aiohttp
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from yarl import URL

from cronwheel.worker.executors.http import GuardedResolver, guarded_socket_factory, parse_networks
from cronwheel.worker.executors.wire import (
    MAX_HEAD_BYTES,
    ConnectError,
    DisconnectedError,
    HttpPool,
    InvalidRequestError,
    InvalidResponseError,
)

LOOPBACK = parse_networks(("127.0.0.0/8",))
OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"

Answer = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]
Serve = Callable[[Answer], Awaitable["Server"]]


class Server:
    """Accepts connections and hands each to ``answer``; counts connections and requests."""

    def __init__(self, answer: Answer) -> None:
        self.answer = answer
        self.connections = 0
        self.requests: list[bytes] = []
        self.server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self.answer(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    async def read_request(self, reader: asyncio.StreamReader) -> bytes:
        head = await reader.readuntil(b"\r\n\r\n")
        length = next(
            (
                int(line.split(b":")[1])
                for line in head.split(b"\r\n")
                if line.lower().startswith(b"content-length")
            ),
            0,
        )
        request = head + await reader.readexactly(length)
        self.requests.append(request)
        return request

    @property
    def url(self) -> URL:
        assert self.server is not None
        return URL(f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/hook?x=1")


@pytest.fixture
async def serve() -> AsyncIterator[Serve]:
    servers: list[Server] = []

    async def start(answer: Answer) -> Server:
        server = Server(answer)
        server.server = await asyncio.start_server(server.handle, "127.0.0.1", 0)
        servers.append(server)
        return server

    yield start
    for server in servers:
        assert server.server is not None
        server.server.close()


@pytest.fixture
async def pool() -> AsyncIterator[HttpPool]:
    made = HttpPool(GuardedResolver(aiohttp.DefaultResolver(), LOOPBACK), guarded_socket_factory(LOOPBACK))
    yield made
    await made.close()


def keep_answering(response: bytes, server: list[Server]) -> Answer:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            await server[0].read_request(reader)
            writer.write(response)
            await writer.drain()

    return answer


async def test_a_kept_connection_serves_the_next_request(serve: Serve, pool: HttpPool) -> None:
    box: list[Server] = []
    box.append(await serve(keep_answering(OK, box)))
    for _ in range(3):
        response, sent = await pool.request("POST", box[0].url, [("X-A", "1")], b"{}", 100)
        assert (response.status, response.body) == (200, b"ok")
    assert box[0].connections == 1
    assert box[0].requests[0].startswith(b"POST /hook?x=1 HTTP/1.1\r\nHost: 127.0.0.1:")
    assert [name for name, _ in sent] == ["Host", "X-A", "Content-Length"]


async def test_user_info_is_sent_as_basic_credentials(serve: Serve, pool: HttpPool) -> None:
    box: list[Server] = []
    box.append(await serve(keep_answering(OK, box)))
    url = box[0].url.with_user("hook user").with_password("p:w")
    _, sent = await pool.request("GET", url, [], None, 100)
    assert ("Authorization", "Basic aG9vayB1c2VyOnA6dw==") in sent  # base64 of "hook user:p:w"
    assert b"Authorization: Basic aG9vayB1c2VyOnA6dw==\r\n" in box[0].requests[0]
    assert b"p:w@" not in box[0].requests[0]


async def test_a_request_on_a_connection_the_server_closed_goes_on_a_new_one(
    serve: Serve, pool: HttpPool
) -> None:
    box: list[Server] = []

    async def answer_once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await box[0].read_request(reader)
        writer.write(OK)  # keep-alive, then hangs up as soon as the next request comes
        await writer.drain()
        await reader.read(1)

    box.append(await serve(answer_once))
    assert (await pool.request("POST", box[0].url, [], b"{}", 100))[0].status == 200
    assert (await pool.request("POST", box[0].url, [], b"{}", 100))[0].status == 200
    assert box[0].connections == 2  # the second request was sent again, once, on a new connection


async def test_a_connection_idle_beyond_keepalive_is_not_used_again(serve: Serve) -> None:
    box: list[Server] = []
    box.append(await serve(keep_answering(OK, box)))
    guard = guarded_socket_factory(LOOPBACK)
    pool = HttpPool(GuardedResolver(aiohttp.DefaultResolver(), LOOPBACK), guard, keepalive_s=0.05)
    try:
        await pool.request("GET", box[0].url, [], None, 100)
        await pool.request("GET", box[0].url, [], None, 100)
        assert box[0].connections == 1
        await asyncio.sleep(0.1)
        await pool.request("GET", box[0].url, [], None, 100)
        assert box[0].connections == 2
    finally:
        await pool.close()


async def test_a_new_connection_closed_without_an_answer_is_an_error(serve: Serve, pool: HttpPool) -> None:
    async def hang_up(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")

    server = await serve(hang_up)
    with pytest.raises(DisconnectedError):
        await pool.request("GET", server.url, [], None, 100)
    assert server.connections == 1  # not sent twice


async def test_a_body_longer_than_the_limit_is_cut_and_its_connection_closed(
    serve: Serve, pool: HttpPool
) -> None:
    box: list[Server] = []
    long = b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"x" * 1000
    box.append(await serve(keep_answering(long, box)))
    first, _ = await pool.request("GET", box[0].url, [], None, 10)
    second, _ = await pool.request("GET", box[0].url, [], None, 10)
    assert first.body == second.body == b"x" * 10
    assert box[0].connections == 2


@pytest.mark.parametrize(
    ("response", "body"),
    [
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n", b"abcde"),
        (b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 1\r\n\r\nz", b"z"),
        (b"HTTP/1.1 204 No Content\r\n\r\n", b""),
    ],
    ids=["chunked", "interim answer first", "no body"],
)
async def test_bodies(serve: Serve, pool: HttpPool, response: bytes, body: bytes) -> None:
    box: list[Server] = []
    box.append(await serve(keep_answering(response, box)))
    got, _ = await pool.request("POST", box[0].url, [], b"{}", 100)
    assert got.body == body
    assert got.status != 100
    again, _ = await pool.request("POST", box[0].url, [], b"{}", 100)
    assert again.body == body
    assert box[0].connections == 1


async def test_a_body_read_until_the_server_closes(serve: Serve, pool: HttpPool) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 500 Oops\r\nRetry-After: 7\r\n\r\nsomething broke")

    server = await serve(answer)
    response, _ = await pool.request("GET", server.url, [], None, 100)
    assert (response.status, response.body, response.header("retry-after")) == (500, b"something broke", "7")


async def test_a_head_request_does_not_wait_for_a_body(serve: Serve, pool: HttpPool) -> None:
    box: list[Server] = []
    box.append(await serve(keep_answering(b"HTTP/1.1 200 OK\r\nContent-Length: 50\r\n\r\n", box)))
    response, _ = await asyncio.wait_for(pool.request("HEAD", box[0].url, [], None, 100), 5)
    assert (response.status, response.body) == (200, b"")


@pytest.mark.parametrize(
    "response",
    [
        b"SSH-2.0-OpenSSH_9.2\r\n\r\n",
        b"HTTP/1.1 200 OK\r\nX-Big: " + b"a" * MAX_HEAD_BYTES + b"\r\n\r\n",
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n",
    ],
    ids=["not HTTP", "headers too long", "upgrade"],
)
async def test_answers_that_are_not_a_response_are_refused(
    serve: Serve, pool: HttpPool, response: bytes
) -> None:
    box: list[Server] = []
    box.append(await serve(keep_answering(response, box)))
    with pytest.raises(InvalidResponseError):
        await pool.request("GET", box[0].url, [], None, 100)


async def test_a_line_break_in_a_header_is_never_written(serve: Serve, pool: HttpPool) -> None:
    box: list[Server] = []
    box.append(await serve(keep_answering(OK, box)))
    with pytest.raises(InvalidRequestError):
        await pool.request("GET", box[0].url, [("X-A", "1\r\nX-Evil: 1")], None, 100)
    assert box[0].connections == 0


async def test_nothing_listening_is_a_connect_error(pool: HttpPool) -> None:
    with pytest.raises(ConnectError):
        await pool.request("GET", URL("http://127.0.0.1:9/"), [], None, 100)


async def test_a_cancelled_request_closes_its_connection(serve: Serve, pool: HttpPool) -> None:
    box: list[Server] = []

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await box[0].read_request(reader)
        if len(box[0].requests) == 1:
            await asyncio.sleep(10)
        writer.write(OK)
        await writer.drain()
        await reader.read(1)

    box.append(await serve(slow))
    with pytest.raises(TimeoutError):
        async with asyncio.timeout(0.2):
            await pool.request("GET", box[0].url, [], None, 100)
    response, _ = await pool.request("GET", box[0].url, [], None, 100)
    assert response.status == 200
    assert box[0].connections == 2  # the late answer of the first can never be read as the second's


# -- TLS ---------------------------------------------------------------------------------------


def _certificate(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hooks.test")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    return cert_path, key_path


async def test_tls_is_verified_against_the_trusted_authorities(tmp_path: Path) -> None:
    cert, key = _certificate(tmp_path)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(OK)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0, ssl=server_tls)
    url = URL(f"https://127.0.0.1:{server.sockets[0].getsockname()[1]}/")
    trusting = ssl.create_default_context(cafile=str(cert))
    pools = [
        HttpPool(
            GuardedResolver(aiohttp.DefaultResolver(), LOOPBACK),
            guarded_socket_factory(LOOPBACK),
            ssl_context=tls,
        )
        for tls in (trusting, None)
    ]
    try:
        response, _ = await pools[0].request("GET", url, [], None, 100)
        assert response.status == 200
        with pytest.raises(ConnectError) as refused:  # the default authorities do not know it
            await pools[1].request("GET", url, [], None, 100)
        assert isinstance(refused.value.error, ssl.SSLCertVerificationError)
    finally:
        for each in pools:
            await each.close()
        server.close()
