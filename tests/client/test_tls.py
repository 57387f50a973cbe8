"""The client over HTTPS: a server on loopback with a certificate of a test CA (made with
openssl, as tests/coordinator's), with and without a required client certificate; the CLI takes
the same files from --ca-cert / CRONWHEEL_CA_CERT."""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from click.testing import CliRunner

from coordinator.conftest import Tls
from cronwheel.cli import cli
from cronwheel.client import Client, ConfigurationError, ConnectionFailed


async def _app(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """Answers /v1/healthz as the API does, and /v1/runs with an empty page."""
    if scope["type"] != "http":
        return
    page: dict[str, Any] = {"items": [], "next_cursor": None}
    body = {"status": "ok"} if scope["path"] == "/v1/healthz" else page
    headers = [(b"content-type", b"application/json")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": json.dumps(body).encode()})


class _Https(threading.Thread):
    def __init__(self, tls: Tls, sock: socket.socket, client_certificate: bool) -> None:
        super().__init__(daemon=True)
        self.config = uvicorn.Config(
            _app, log_level="warning", lifespan="off", access_log=False,
            ssl_certfile=str(tls.server_cert), ssl_keyfile=str(tls.server_key), ssl_ca_certs=str(tls.ca),
            ssl_cert_reqs=ssl.CERT_REQUIRED if client_certificate else ssl.CERT_NONE,
        )  # fmt: skip
        self.server = uvicorn.Server(self.config)
        self.sock = sock
        self.ready = threading.Event()

    def run(self) -> None:
        async def serve() -> None:
            task = asyncio.create_task(self.server.serve(sockets=[self.sock]))
            while not self.server.started and not task.done():
                await asyncio.sleep(0.005)
            self.ready.set()
            await task

        asyncio.run(serve())


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Tls:
    return Tls.generate(tmp_path_factory.mktemp("tls"))


def _serve(tls: Tls, client_certificate: bool) -> Iterator[str]:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    thread = _Https(tls, sock, client_certificate)
    thread.start()
    assert thread.ready.wait(10)
    try:
        yield f"https://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        thread.server.should_exit = True
        thread.join(10)
        sock.close()


@pytest.fixture
def https(tls: Tls) -> Iterator[str]:
    yield from _serve(tls, client_certificate=False)


@pytest.fixture
def mutual(tls: Tls) -> Iterator[str]:
    yield from _serve(tls, client_certificate=True)


def test_the_servers_certificate_is_verified_with_the_given_ca(tls: Tls, https: str) -> None:
    with Client(https, ca_cert=tls.ca) as client:
        assert client.health() == {"status": "ok"}
    with (
        Client(https, timeout=5) as client,
        pytest.raises(ConnectionFailed, match="TLS: certificate verify failed"),
    ):
        client.health()  # the usual CAs do not know the test CA


def test_a_server_that_asks_for_a_client_certificate(tls: Tls, mutual: str) -> None:
    with Client(mutual, ca_cert=tls.ca, client_cert=tls.client_cert, client_key=tls.client_key) as client:
        assert client.health() == {"status": "ok"}
    with Client(mutual, ca_cert=tls.ca, timeout=5) as client, pytest.raises(ConnectionFailed):
        client.health()


def test_unreadable_tls_files_are_a_configuration_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError, match=r"cannot load the TLS files \(.*missing.pem\)"):
        Client("https://127.0.0.1:1", ca_cert=tmp_path / "missing.pem")
    with pytest.raises(ConfigurationError, match="needs its client certificate"):
        Client("https://127.0.0.1:1", client_key=tmp_path / "key.pem")


def test_the_cli_takes_the_ca_from_a_flag_or_the_environment(tls: Tls, https: str, tmp_path: Path) -> None:
    env = {
        "CRONWHEEL_CONFIG": str(tmp_path / "config.yaml"),
        "XDG_STATE_HOME": str(tmp_path),
        "CRONWHEEL_CA_CERT": None,
    }
    args = ["runs", "list", "--url", https, "--token", "cw_x_y"]
    flagged = CliRunner().invoke(cli, [*args, "--ca-cert", str(tls.ca)], env=env)
    assert (flagged.exit_code, flagged.stdout) == (0, "no runs\n")
    from_env = CliRunner().invoke(cli, args, env={**env, "CRONWHEEL_CA_CERT": str(tls.ca)})
    assert (from_env.exit_code, from_env.stdout) == (0, "no runs\n")
    unknown = CliRunner().invoke(cli, args, env=env)
    assert unknown.exit_code == 1
    assert f"cannot reach the cronwheel API at {https}: TLS: certificate verify failed" in unknown.stderr
