"""cronwheel.client against a real server: every kind of endpoint, pages and iterators, and the
server's problems raised as the exception of their status."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from typing import Any

import httpx
import pytest

import suite_workers
from api.conftest import BASE_URL, Env
from cli.conftest import Server
from cronwheel.client import (
    ApiError,
    AsyncClient,
    BadRequest,
    Client,
    ClientError,
    Conflict,
    ConnectionFailed,
    Forbidden,
    Invalid,
    NotFound,
    PreconditionFailed,
    RateLimited,
    RequestRefused,
    Unauthenticated,
    collect,
)
from cronwheel.errors import CronwheelError, PermanentError, TransientError
from cronwheel.limits import Limits


def spec(name: str = "nightly", team: str = "data", **changes: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "team": team,
        "name": name,
        "schedule": "0 3 * * *",
        "timezone": "Europe/Berlin",
        "target": {"type": "http", "url": "https://hooks.example.com/nightly"},
        "labels": {"tier": "gold"},
    }
    return {**body, **changes}


@pytest.fixture
def client(server: Server) -> Any:
    with Client(server.url, server.token) as made:
        yield made


def test_a_job_by_id_and_by_team_and_name(client: Client) -> None:
    job = client.create_job(spec())
    assert client.get_job(job["id"]) == client.get_job("data/nightly") == job
    patched = client.update_job("data/nightly", {"description": "v2"}, if_version=job["version"])
    assert (patched["description"], patched["version"]) == ("v2", job["version"] + 1)
    with pytest.raises(PreconditionFailed) as stale:
        client.replace_job(job["id"], spec(description="v3"), if_version=job["version"])
    assert stale.value.status == 412
    assert isinstance(stale.value, Conflict)
    assert f"is at version {patched['version']}, not {job['version']}" in (stale.value.problem.detail or "")
    replaced = client.replace_job(job["id"], spec(description="v3"), if_version=patched["version"])
    assert replaced["description"] == "v3"
    assert client.pause_job("data/nightly", "maintenance")["pause_note"] == "maintenance"
    assert client.resume_job(job["id"], "skip")["paused"] is False


def test_trigger_runs_and_delete(client: Client) -> None:
    job = client.create_job(spec())
    first = client.trigger_job("data/nightly", {"n": 1}, idempotency_key="k-1")
    again = client.trigger_job("data/nightly", {"n": 1}, idempotency_key="k-1")
    assert (first.created, again.created, again.run["id"]) == (True, False, first.run["id"])
    assert first.run["payload"] == {"n": 1}
    plain = client.trigger_job(job["id"])
    assert plain.run["has_payload"] is False
    runs = list(client.iter_job_runs("data/nightly"))
    assert [run["id"] for run in runs] == [plain.run["id"], first.run["id"]]  # newest first
    assert client.get_run(first.run["id"])["events"]
    assert {run["id"] for run in client.iter_runs(states=["PENDING", "RUNNING"])} <= {r["id"] for r in runs}
    client.delete_job(job["id"], if_version=job["version"])
    with pytest.raises(NotFound) as gone:
        client.get_job("data/nightly")
    assert str(gone.value) == "Not found (404): team 'data' has no job named 'nightly'"
    assert len(list(client.iter_job_runs(job["id"]))) == 2  # a deleted job's runs stay readable


def test_pages_and_iterators_follow_the_cursor(client: Client) -> None:
    made = [client.create_job(spec(f"job-{i}"))["id"] for i in range(5)]
    client.create_job(spec("other", team="web"))
    page = client.list_jobs(team="data", limit=2)
    assert [job["id"] for job in page.items] == made[:2]
    assert page.next_cursor is not None
    assert [job["id"] for job in client.iter_jobs(team="data", limit=2)] == made
    assert [job["id"] for job in client.iter_jobs(labels={"tier": "gold"}, team="web")] != []
    first, cursor = collect(lambda n, c: client.list_jobs(team="data", limit=n, cursor=c), 3)
    rest, end = collect(lambda n, c: client.list_jobs(team="data", limit=n, cursor=c), 10, cursor)
    assert [job["id"] for job in first + rest] == made
    assert end is None


def test_validate_writes_nothing_and_raises_as_create(client: Client) -> None:
    checked = client.validate_job(spec())
    assert checked["id"] is None
    assert checked["schedule_description"]
    assert checked["fires"][0]["utc"] == checked["next_run_at"]
    assert client.list_jobs().items == []
    with pytest.raises(Invalid) as invalid:
        client.validate_job(spec(schedule="61 * * * *"))
    assert [error["field"] for error in invalid.value.problem.errors] == ["schedule"]
    job = client.create_job(spec())
    edit = client.validate_job_edit(f"{job['team']}/{job['name']}", spec(description="v2"))
    assert (edit["id"], edit["description"]) == (job["id"], "v2")
    assert client.get_job(job["id"])["version"] == 1


def test_problems_are_raised_by_status(client: Client, server: Server) -> None:
    with pytest.raises(Invalid) as invalid:
        client.create_job(spec(schedule="61 * * * *"))
    assert invalid.value.status == 422
    assert invalid.value.problem.title == "Invalid schedule"
    assert [error["field"] for error in invalid.value.problem.errors] == ["schedule"]
    assert str(invalid.value).startswith("Invalid schedule (422): ")
    client.create_job(spec())
    with pytest.raises(Conflict) as taken:
        client.create_job(spec())
    assert taken.value.status == 409
    assert not isinstance(taken.value, PreconditionFailed)
    made = client.create_token("reader", team="data", scopes=["read"])
    with Client(server.url, made["token"]) as reader:
        assert [job["name"] for job in reader.iter_jobs()] == ["nightly"]
        with pytest.raises(Forbidden):
            reader.create_job(spec("second"))
    with Client(server.url, "cw_nope_nope") as stranger, pytest.raises(Unauthenticated) as refused:
        stranger.list_jobs()
    assert refused.value.problem.type.startswith("urn:cronwheel:problem:")
    with pytest.raises(BadRequest):
        client.delete_job("data/nightly", if_version=-1)
    for error in (invalid.value, taken.value, refused.value):
        assert isinstance(error, RequestRefused)
        assert isinstance(error, ApiError)
        assert isinstance(error, ClientError)
        assert isinstance(error, PermanentError)
        assert isinstance(error, CronwheelError)


def test_tokens_and_secrets(client: Client) -> None:
    made = client.create_token(
        "ci", team="data", scopes=["read", "trigger"], expires_at="2027-01-01T00:00:00Z"
    )
    assert made["token"].startswith("cw_")
    assert made["scopes"] == ["read", "trigger"]
    assert "token" not in client.get_token(made["id"])
    assert made["id"] in {token["id"] for token in client.iter_tokens(team="data")}
    client.revoke_token(made["id"])
    assert client.get_token(made["id"])["state"] == "revoked"
    assert made["id"] not in {token["id"] for token in client.iter_tokens()}
    assert made["id"] in {token["id"] for token in client.iter_tokens(include_revoked=True)}
    first, second = client.set_secret("data", "api-key", "v1"), client.set_secret("data", "api-key", "v2")
    assert (first.created, second.created, second.secret["name"]) == (True, False, "api-key")
    assert "value" not in client.get_secret("data", "api-key")
    assert [secret["name"] for secret in client.iter_secrets("data")] == ["api-key"]
    assert client.reencrypt_secrets()["failed"] == []
    client.delete_secret("data", "api-key")
    with pytest.raises(NotFound):
        client.get_secret("data", "api-key")


def test_the_process_endpoints(client: Client) -> None:
    assert client.health() == {"status": "ok"}
    assert client.ready() == {"status": "ready", "checks": {"store": True}}
    assert "# TYPE" in client.metrics()
    assert client.openapi()["info"]["title"]
    preview = client.preview_schedule(
        "0 3 * * *", timezone="Europe/Berlin", count=2, after="2026-03-01T00:00:00Z"
    )
    assert [fire["utc"] for fire in preview["fires"]] == ["2026-03-01T02:00:00Z", "2026-03-02T02:00:00Z"]
    with pytest.raises(NotFound, match="cluster status is not served by this process"):
        client.cluster_status()


def test_an_unreachable_server_is_a_connection_failure() -> None:
    url = f"http://127.0.0.1:{suite_workers.free_port()}"  # nothing listens on it
    with Client(url, "cw_x_y", timeout=2) as client, pytest.raises(ConnectionFailed) as failed:
        client.health()
    assert str(failed.value) == f"cannot reach the cronwheel API at {url}: connection refused"
    assert isinstance(failed.value, TransientError)
    assert failed.value.url == url


def test_from_environment_takes_the_url_and_token_of_the_environment(server: Server, tmp_path: Any) -> None:
    env = {
        "CRONWHEEL_URL": server.url,
        "CRONWHEEL_TOKEN": server.token,
        "CRONWHEEL_CONFIG": str(tmp_path / "none.yaml"),
    }
    with Client.from_environment(env=env, cwd=tmp_path) as client:
        assert client.source == "CRONWHEEL_TOKEN"
        assert client.list_jobs().items == []
    with Client.from_environment(token="cw_other_x", env=env, cwd=tmp_path) as client:
        assert client.source == "--token"
        with pytest.raises(Unauthenticated):
            client.list_jobs()


async def test_the_asyncio_client_has_the_same_calls(env: Env) -> None:
    env.service.limits = dataclasses.replace(Limits(), rate_per_s=0.5, rate_burst=6)  # the 7th request waits
    transport = httpx.ASGITransport(app=env.app)
    async with AsyncClient(BASE_URL, env.admin_token, transport=transport) as client:
        made = [(await client.create_job(spec(f"job-{i}")))["id"] for i in range(3)]
        assert [job["id"] async for job in client.iter_jobs(limit=2)] == made
        assert (await client.get_job("data/job-1"))["id"] == made[1]
        with pytest.raises(RateLimited) as limited:
            await client.get_job(made[0])
        assert limited.value.retry_after == 2.0
        assert limited.value.retryable


def test_the_cli_starts_without_httpx_until_a_command_sends() -> None:
    code = "import sys, cronwheel.cli, cronwheel.client; print('httpx' in sys.modules)"
    found = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert found.stdout.strip() == "False"


def test_upcoming_fires_count_the_teams_jobs(client: Client) -> None:
    client.create_job(spec(schedule="* * * * *"))
    client.create_job(spec(name="paused", schedule="* * * * *"))
    client.pause_job("data/paused", "not counted")
    upcoming = client.upcoming_fires(window_s=600, bucket_s=60)
    assert (upcoming["window_s"], upcoming["bucket_s"], upcoming["jobs"]) == (600, 60, 1)
    assert upcoming["teams"] == {"data": upcoming["fires"]}
    assert 10 <= upcoming["fires"] <= 11  # one a minute (a first bucket begun before now may hold one)
