"""Team secrets and signed webhooks in ``cronwheel server`` as a user runs it (a subprocess over a
SQLite file): the first start makes its key file, a secret set with the CLI reaches a webhook on
127.0.0.1, every attempt is signed (verified with the Standard Webhooks reference library,
retries included), and the value is nowhere else: not in a response, the run's record, the
database files or the server's log. A server without the key fails the attempt, saying so."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web
from server_harness import ServerProcess, wait_for
from standardwebhooks import Webhook

from cronwheel.secrets.crypto import new_key
from cronwheel.secrets.keys import ENV_KEYS, key_line, read_key_file
from cronwheel.secrets.signing import new_signing_secret

pytestmark = pytest.mark.integration

TOKEN = "sk_live_it-4d2f-token-5150"


@dataclass
class Echo:
    """A webhook that fails its first call and echoes the Authorization it got: raw bodies kept."""

    url: str = ""
    seen: list[tuple[dict[str, str], bytes]] = field(default_factory=list)


@pytest.fixture
async def echo() -> AsyncIterator[Echo]:
    state = Echo()

    async def handle(request: web.Request) -> web.Response:
        state.seen.append((dict(request.headers), await request.read()))
        status = 500 if len(state.seen) == 1 else 200
        return web.Response(status=status, text=f"got {request.headers.get('Authorization')}")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    state.url = f"http://127.0.0.1:{runner.addresses[0][1]}/hook"
    yield state
    await runner.cleanup()


@pytest.fixture(autouse=True)
def _no_keys_from_outside(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(ENV_KEYS, raising=False)
    monkeypatch.delenv("CRONWHEEL_SECRET_KEY_FILE", raising=False)


def cli(server: ServerProcess, *args: str, value: str | None = None) -> subprocess.CompletedProcess[str]:
    """The CLI run where the server was started: it finds the server's admin token by itself."""
    command = [sys.executable, "-m", "cronwheel", *args, "--url", server.url]
    return subprocess.run(
        command, input=value, capture_output=True, text=True, timeout=60, check=False, cwd=server.db.parent
    )


async def finished(api: httpx.AsyncClient, run_id: str) -> dict[str, Any] | None:
    run: dict[str, Any] = (await api.get(f"/v1/runs/{run_id}")).json()
    return run if run["state"] in ("SUCCESS", "FAILED") else None


async def trigger(api: httpx.AsyncClient, job_id: str) -> dict[str, Any]:
    response = await api.post(f"/v1/jobs/{job_id}/trigger", json={"payload": {"invoice": 42, "w": "wörld"}})
    assert response.status_code == 201, response.text
    run: dict[str, Any] = response.json()
    return run


async def test_a_secret_reaches_its_webhook_signed_and_is_kept_nowhere_else(
    server_factory: Callable[..., ServerProcess], echo: Echo, tmp_path: Path
) -> None:
    server = server_factory()
    key_file = tmp_path / "cronwheel.db.keys"
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    keyring = read_key_file(key_file)
    assert (
        f"secret keys: created {key_file} (mode 0600): back it up with the database" in server.log.read_text()
    )
    signing = new_signing_secret()
    set_token = cli(server, "secrets", "set", "billing/api-key", value=TOKEN + "\n")
    assert set_token.returncode == 0, set_token.stderr
    assert cli(server, "secrets", "set", "billing/hook-signing", value=signing).returncode == 0
    async with server.client() as api:
        target = {
            "type": "http",
            "url": echo.url,
            "headers": {"Authorization": {"secret": "api-key"}},
            "signing_secret": {"secret": "hook-signing"},
        }
        retry = {"max_attempts": 2, "initial_delay_s": 1.0, "jitter": False}
        body = {"team": "billing", "name": "charge", "schedule": "@yearly", "target": target, "retry": retry}
        created = await api.post("/v1/jobs", json=body)
        assert created.status_code == 201, created.text
        job = created.json()
        trigger_id = (await trigger(api, job["id"]))["id"]
        run = await wait_for(lambda: finished(api, trigger_id), timeout=20)
        assert run is not None
        assert run["state"] == "SUCCESS"
        assert [a["output"] for a in run["attempt_details"]] == ["got [secret:api-key]"] * 2
        responses = [created.text, (await api.get(f"/v1/jobs/{job['id']}")).text, str(run)]
        responses.append((await api.get("/v1/teams/billing/secrets")).text)
    assert all(TOKEN not in text for text in responses)

    (first, body1), (second, body2) = echo.seen
    assert first["Authorization"] == second["Authorization"] == TOKEN
    assert first["webhook-id"] == second["webhook-id"] == trigger_id  # the execution id
    assert int(second["webhook-timestamp"]) > int(first["webhook-timestamp"])  # a retry: a new timestamp
    assert first["webhook-signature"] != second["webhook-signature"]
    assert Webhook(signing).verify(body1, first) == {"invoice": 42, "w": "wörld"}
    assert Webhook(signing).verify(body2, second) == {"invoice": 42, "w": "wörld"}

    assert server.stop() == 0
    log = server.log.read_text()
    assert TOKEN not in log
    assert signing.removeprefix("whsec_") not in log
    assert key_line(keyring.newest).split(":", 1)[1] not in log
    for path in tmp_path.glob("cronwheel.db*"):
        if path != key_file:
            assert TOKEN.encode() not in path.read_bytes(), path.name

    again = server_factory()  # the same database: the key file is read, not made again
    assert (
        f"secret keys: from {key_file} (new values sealed with key {keyring.newest.id})"
        in again.log.read_text()
    )
    async with again.client() as api:
        rerun_id = (await trigger(api, job["id"]))["id"]
        rerun = await wait_for(lambda: finished(api, rerun_id), timeout=20)
    assert rerun["state"] == "SUCCESS"
    assert echo.seen[-1][0]["Authorization"] == TOKEN


async def test_a_server_without_the_key_fails_the_attempt_saying_why(
    server_factory: Callable[..., ServerProcess], echo: Echo, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = server_factory()
    assert cli(first, "secrets", "set", "billing/api-key", value=TOKEN).returncode == 0
    async with first.client() as api:
        target = {"type": "http", "url": echo.url, "headers": {"Authorization": {"secret": "api-key"}}}
        body = {"team": "billing", "name": "charge", "schedule": "@yearly", "target": target}
        job = (await api.post("/v1/jobs", json=body)).json()
    assert first.stop() == 0
    monkeypatch.setenv(ENV_KEYS, key_line(new_key("other")))  # not the key the value was sealed with
    second = server_factory()
    assert (
        "secret keys: from CRONWHEEL_SECRET_KEYS (new values sealed with key other)" in second.log.read_text()
    )
    async with second.client() as api:
        run_id = (await trigger(api, job["id"]))["id"]
        run = await wait_for(lambda: finished(api, run_id), timeout=20)
    [attempt] = run["attempt_details"]
    assert attempt["outcome"] == "error"
    assert "secret 'api-key' of team 'billing' was encrypted with key 'k2" in attempt["error"]
    assert "which this process does not have (it has other;" in attempt["error"]
    assert echo.seen == []  # nothing was sent
    assert "Traceback" not in second.log.read_text()


def test_keys_given_two_ways_stop_the_server_at_start(tmp_path: Path) -> None:
    key_file = tmp_path / "keys"
    key_file.write_text(key_line(new_key("k1")) + "\n")
    env = {**os.environ, ENV_KEYS: key_line(new_key("k2"))}
    command = [
        sys.executable, "-m", "cronwheel", "server", "--port", "0",
        "--database-url", f"sqlite:///{tmp_path / 'c.db'}", "--secret-key-file", str(key_file),
    ]  # fmt: skip
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 2
    assert "error: give the secret keys one way" in result.stderr
    assert "Traceback" not in result.stderr
