"""The limits of `cronwheel server` as a client meets them over a socket: what the HTTP server
(uvicorn, h11) hands the application, and the options that set each limit."""

from __future__ import annotations

import asyncio
import json
import socket
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
import pytest
from server_harness import ServerProcess

pytestmark = pytest.mark.integration


def _address(server: ServerProcess) -> tuple[str, int]:
    parts = urlsplit(server.url)
    assert parts.hostname is not None
    assert parts.port is not None
    return parts.hostname, parts.port


def _exchange(address: tuple[str, int], pieces: list[bytes], pause_s: float = 0.0) -> bytes:
    """Send ``pieces`` (pausing between them, so that the server reads them one by one) and
    read the answer until the server closes or a whole response has arrived."""
    with socket.create_connection(address, timeout=10) as connection:
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for piece in pieces:
            connection.sendall(piece)
            time.sleep(pause_s)
        answer = b""
        while not _complete(answer):
            chunk = connection.recv(65536)
            if not chunk:
                break
            answer += chunk
    return answer


def _complete(answer: bytes) -> bool:
    head, _, body = answer.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        name, _, value = line.partition(b":")
        if name.lower() == b"content-length":
            return len(body) >= int(value)
    return False


def _problem(answer: bytes) -> tuple[int, str, dict[str, Any]]:
    head, _, body = answer.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = dict(line.lower().split(": ", 1) for line in lines[1:])
    return int(lines[0].split()[1]), headers.get("content-type", ""), json.loads(body)


async def test_ten_thousand_header_fields_are_answered_431(server: ServerProcess) -> None:
    """They were answered 200: h11 bounds only a head that has not arrived whole. 87 KB: within
    what the server buffers of a head (its header limit and 64 KiB), so it reaches the check
    however it is read; a longer head may be cut short by the HTTP server's own plain 400."""
    fields = b"".join(b"X%d:v\r\n" % index for index in range(10_000))
    assert len(fields) < 32 * 1024 + 64 * 1024
    request = b"GET /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n" + fields + b"\r\n"
    answer = await asyncio.to_thread(_exchange, _address(server), [request])
    status, content_type, problem = _problem(answer)
    assert (status, content_type) == (431, "application/problem+json")
    assert problem["type"] == "urn:cronwheel:problem:headers-too-large"


async def test_a_head_over_the_limit_that_arrives_in_pieces_gets_the_same_431(server: ServerProcess) -> None:
    """40 KiB of header fields in 4 KiB pieces: h11 buffers at most 16 KiB of an incomplete head
    by default and answered a plain-text 400; the server lets it buffer the limit and room."""
    fields = b"".join(b"X-Filler-%d: %s\r\n" % (index, b"v" * 1000) for index in range(40))
    request = b"GET /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\n" + fields + b"\r\n"
    pieces = [request[start : start + 4096] for start in range(0, len(request), 4096)]
    answer = await asyncio.to_thread(_exchange, _address(server), pieces, 0.01)
    status, content_type, problem = _problem(answer)
    assert (status, content_type) == (431, "application/problem+json")
    assert problem["max_header_bytes"] == 32 * 1024


async def test_a_20_mb_body_is_refused_before_it_is_sent(server: ServerProcess) -> None:
    """The answer comes on the head alone: not a byte of the body is needed (it is never read
    whole nor parsed as JSON)."""
    head = (
        b"POST /v1/jobs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 20000000\r\n\r\n"
    )
    answer = await asyncio.to_thread(_exchange, _address(server), [head])
    status, content_type, problem = _problem(answer)
    assert (status, content_type) == (413, "application/problem+json")
    assert problem["max_body_bytes"] == 2 * 1024 * 1024
    assert b"\r\nconnection: close\r\n" in answer.lower()


async def test_the_options_set_the_limits(server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory(
        "--min-interval", "60", "--max-jobs-per-team", "1", "--rate-limit", "0.01", "--rate-burst", "5"
    )
    job = {"team": "it", "name": "a", "target": {"type": "http", "url": "https://hooks.example.com/x"}}
    async with server.client() as api:
        frequent = await api.post("/v1/jobs", json={**job, "schedule": "*/10 * * * * *"})
        assert frequent.json()["type"] == "urn:cronwheel:problem:schedule-too-frequent"
        assert (await api.post("/v1/jobs", json={**job, "schedule": "* * * * *"})).status_code == 201
        full = await api.post("/v1/jobs", json={**job, "name": "b", "schedule": "* * * * *"})
        assert full.json()["type"] == "urn:cronwheel:problem:quota-exceeded"
        assert [(await api.get("/v1/jobs")).status_code for _ in range(3)] == [200, 200, 429]


async def _wrong_tokens_forwarded_for(server: ServerProcess, count: int) -> list[int]:
    wrong = {"Authorization": "Bearer wrong"}
    addresses = (f"198.51.100.{n}" for n in range(count))
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as local:
        return [
            (await local.get("/v1/jobs", headers={**wrong, "X-Forwarded-For": a})).status_code
            for a in addresses
        ]


async def test_a_local_client_cannot_choose_the_address_it_is_counted_as(
    server_factory: Callable[..., ServerProcess],
) -> None:
    """uvicorn believes X-Forwarded-For from any peer on loopback unless told otherwise: a client
    on this machine that rotated it was never refused (700 wrong tokens, no 429)."""
    server = server_factory("--rate-limit", "0.01", "--rate-burst", "5")
    assert await _wrong_tokens_forwarded_for(server, 10) == [401] * 5 + [429] * 5


async def test_a_proxy_the_operator_names_is_believed(server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory("--rate-limit", "0.01", "--rate-burst", "5", "--forwarded-allow-ips", "127.0.0.1")
    assert await _wrong_tokens_forwarded_for(server, 10) == [401] * 10
