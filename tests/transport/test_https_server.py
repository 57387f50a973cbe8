"""``cronwheel server`` serving HTTPS (``--tls-cert``/``--tls-key``, or their CRONWHEEL_*
variables), and requiring client certificates with ``--tls-client-ca``: a real server in a
subprocess, talked to with httpx over TLS."""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from cronwheel.errors import PermanentError
from cronwheel.node.server import ServerSettings, serve

from .servers import Node, Pki, client_context


@pytest.fixture
def nodes(tmp_path: Path) -> Iterator[list[Node]]:
    started: list[Node] = []
    yield started
    for node in started:
        node.stop()


def _server(tmp_path: Path, nodes: list[Node], *args: str, env: dict[str, str] | None = None) -> Node:
    node = Node(tmp_path / "server.log")
    nodes.append(node)
    node.start("server", "--port", "0", "--database-url", f"sqlite:///{tmp_path / 'cw.db'}", *args, env=env)
    return node


def _token(tmp_path: Path) -> dict[str, str]:
    return {"Authorization": f"Bearer {(tmp_path / 'cw.db.token').read_text().strip()}"}


async def test_the_server_serves_https_only_and_says_so(tmp_path: Path, pki: Pki, nodes: list[Node]) -> None:
    env = {"CRONWHEEL_TLS_CERT": str(pki.server.cert), "CRONWHEEL_TLS_KEY": str(pki.server.key)}
    node = _server(tmp_path, nodes, env=env)
    assert node.url.startswith("https://127.0.0.1:")
    async with httpx.AsyncClient(base_url=node.url, verify=client_context(pki.ca.ca), timeout=10) as client:
        assert (await client.get("/healthz")).status_code == 200
        assert (await client.get("/v1/jobs", headers=_token(tmp_path))).status_code == 200
        plain = node.url.replace("https://", "http://")
        async with httpx.AsyncClient(timeout=5) as plain_client:
            with pytest.raises(httpx.TransportError):  # the TLS port does not speak HTTP
                await plain_client.get(f"{plain}/healthz")
        assert (await client.get("/healthz")).status_code == 200  # and keeps serving
    async with httpx.AsyncClient(verify=client_context(pki.other.ca), timeout=5) as stranger:
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
            await stranger.get(f"{node.url}/healthz")


async def test_a_client_certificate_is_required_with_a_client_ca(
    tmp_path: Path, pki: Pki, nodes: list[Node]
) -> None:
    tls = (
        "--tls-cert",
        str(pki.server.cert),
        "--tls-key",
        str(pki.server.key),
        "--tls-client-ca",
        str(pki.ca.ca),
    )
    node = _server(tmp_path, nodes, *tls)
    verified = client_context(pki.ca.ca, pki.client)
    async with httpx.AsyncClient(base_url=node.url, verify=verified, timeout=10) as client:
        assert (await client.get("/v1/jobs", headers=_token(tmp_path))).status_code == 200
    for refused in (client_context(pki.ca.ca), client_context(pki.ca.ca, pki.stranger)):
        async with httpx.AsyncClient(verify=refused, timeout=5) as client:
            with pytest.raises(httpx.TransportError):  # no certificate, or one of another CA
                await client.get(f"{node.url}/healthz")


@pytest.mark.parametrize(
    ("which", "says"),
    [
        ("missing-key", r"key .*nowhere\.key \(--tls-key\): no such file"),
        ("mismatched-key", r"key .*client\.key \(--tls-key\) does not match certificate .*server\.pem"),
        ("cert-alone", "HTTPS needs both --tls-cert and --tls-key"),
        ("not-a-ca", r"CA file .*server\.key \(--tls-client-ca\): no PEM certificate in it"),
    ],
)
async def test_unusable_tls_files_stop_the_start_before_any_backend(
    tmp_path: Path, pki: Pki, which: str, says: str
) -> None:
    cert, key = str(pki.server.cert), str(pki.server.key)
    cert_, key_, ca_ = {
        "missing-key": (cert, str(tmp_path / "nowhere.key"), None),
        "mismatched-key": (cert, str(pki.client.key), None),
        "cert-alone": (cert, None, None),
        "not-a-ca": (cert, key, key),
    }[which]
    database = f"sqlite:///{tmp_path / 'cw.db'}"
    settings = ServerSettings(port=0, database_url=database, tls_cert=cert_, tls_key=key_, tls_client_ca=ca_)
    with pytest.raises(PermanentError, match=says):
        await serve(settings, announce=lambda _line: None)
    assert not (tmp_path / "cw.db").exists()  # stopped before the store was opened


def test_the_command_says_so_and_exits_2_without_a_traceback(tmp_path: Path, pki: Pki) -> None:
    database = f"sqlite:///{tmp_path / 'cw.db'}"
    tls = ["--tls-cert", str(pki.server.cert), "--tls-key", str(pki.client.key)]
    command = [sys.executable, "-m", "cronwheel", "server", "--port", "0", "--database-url", database, *tls]
    done = subprocess.run(command, capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert re.search(r"^error: key .*client\.key \(--tls-key\) does not match certificate", done.stderr, re.M)
