"""Authentication with the real server: the
embedded server's admin token file, the CLI finding it by itself, ``tokens create --bootstrap``,
and cross-site or rebound requests refused before they change or show anything."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from server_harness import ServerProcess, Sink

import suite_workers

pytestmark = pytest.mark.integration


def _free_port() -> int:
    """A loopback port nothing listens on, of this xdist worker's own (``suite_workers``)."""
    return suite_workers.free_port()


async def _cli(*args: str, env: dict[str, str], cwd: Path) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "cronwheel", *args, env=env, cwd=cwd,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    out, err = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


def _clean_env(tmp_path: Path) -> dict[str, str]:
    """The environment of a user with no cronwheel settings, and a home of the test's own."""
    env = {key: value for key, value in os.environ.items() if not key.startswith("CRONWHEEL_")}
    return {**env, "HOME": str(tmp_path / "home"), "XDG_STATE_HOME": str(tmp_path / "state"),
            "XDG_CONFIG_HOME": str(tmp_path / "config"), "PYTHONUNBUFFERED": "1"}  # fmt: skip


async def test_the_server_keeps_its_admin_token_in_a_private_file_and_never_prints_it(
    server_factory: Callable[..., ServerProcess],
) -> None:
    server = server_factory()
    token = server.token_file.read_text().strip()
    assert token.startswith("cw_")
    assert stat.S_IMODE(server.token_file.stat().st_mode) == 0o600
    log = server.log.read_text()
    assert f"admin token in {server.token_file}" in log
    assert token not in log
    async with server.client() as api:
        assert (await api.get("/v1/tokens")).json()["items"][0]["name"] == "local admin"

    server.restart()  # the same token, still working
    assert server.token_file.read_text().strip() == token
    async with server.client() as api:
        own = token.split("_")[1]
        assert (await api.delete(f"/v1/tokens/{own}")).status_code == 204
    server.restart()  # a revoked token in the file is replaced
    replaced = server.token_file.read_text().strip()
    assert replaced != token
    async with server.client() as api:
        assert (await api.get("/v1/jobs")).status_code == 200
    assert token not in server.log.read_text()
    assert replaced not in server.log.read_text()


async def test_without_a_token_nothing_but_health_answers(server: ServerProcess) -> None:
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as anonymous:
        assert (await anonymous.get("/healthz")).status_code == 200
        refused = await anonymous.get("/v1/jobs")
        assert refused.status_code == 401
        assert refused.headers["content-type"] == "application/problem+json"


async def test_a_cross_site_trigger_sends_nothing_and_a_rebound_host_reads_nothing(
    server: ServerProcess, sink: Sink
) -> None:
    async with server.client() as api:
        body = {
            "team": "it",
            "name": "hook",
            "schedule": "0 0 1 1 *",
            "target": {"type": "http", "url": f"{sink.url}/x"},
        }
        job = (await api.post("/v1/jobs", json=body)).json()
        for headers in (
            {"Content-Type": "text/plain", "Origin": "https://evil.example"},
            {"Content-Type": "text/plain", "Sec-Fetch-Site": "cross-site"},
        ):
            refused = await api.post(f"/v1/jobs/{job['id']}/trigger", headers=headers)
            assert refused.status_code == 403, refused.text
        rebound = await api.get("/v1/jobs", headers={"Host": "rebind.attacker.example"})
        assert rebound.status_code == 421
        assert "hook" not in rebound.text
        assert (await api.get(f"/v1/jobs/{job['id']}/runs")).json()["items"] == []
    async with httpx.AsyncClient(base_url=server.url, timeout=10) as anonymous:
        simple = await anonymous.post(
            f"/v1/jobs/{job['id']}/trigger",
            headers={"Content-Type": "text/plain", "Origin": "https://evil.example"},
        )
        assert simple.status_code == 403
    await asyncio.sleep(1.0)
    assert sink.deliveries == []


async def test_the_cli_finds_the_local_token_from_any_directory(tmp_path: Path) -> None:
    port = _free_port()
    env = _clean_env(tmp_path)
    server = ServerProcess(tmp_path / "data" / "cronwheel.db", ("--port", str(port)), tmp_path / "server.log")
    server.db.parent.mkdir()
    server.start(env=env)
    try:
        elsewhere = tmp_path / "elsewhere"
        elsewhere.mkdir()
        url = f"http://127.0.0.1:{port}"
        code, out, err = await _cli("jobs", "list", "--url", url, "-o", "json", env=env, cwd=elsewhere)
        assert code == 0, err
        assert json.loads(out)["items"] == []
        env_without_state = {**env, "XDG_STATE_HOME": str(tmp_path / "other-state")}
        code, _, err = await _cli("jobs", "list", "--url", url, env=env_without_state, cwd=elsewhere)
        assert code == 2
        assert "no token was sent" in err
    finally:
        server.stop()


async def test_bootstrap_writes_a_working_admin_token_straight_to_the_database(
    server: ServerProcess, tmp_path: Path
) -> None:
    env = _clean_env(tmp_path)
    database = f"sqlite:///{server.db}"
    code, out, err = await _cli(
        "tokens", "create", "--bootstrap", "--database-url", database, env=env, cwd=tmp_path
    )
    assert code == 0, err
    token = out.strip()
    assert token.startswith("cw_")
    assert "\n" not in token
    assert "shown once" in err
    async with httpx.AsyncClient(base_url=server.url, headers={"Authorization": f"Bearer {token}"}) as api:
        listed = (await api.get("/v1/tokens")).json()["items"]
        assert {t["name"] for t in listed} == {"local admin", "bootstrap admin"}
