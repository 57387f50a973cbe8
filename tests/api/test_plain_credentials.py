"""Credentials given in clear in a job (an ``Authorization`` header, a header whose name carries a
credential, URL user info or a secret query parameter, a broker's password or token) are refused
by default (``--allow-plain-credentials`` stores them): a 422 naming the field that says to use a
secret reference, nothing stored, the value never echoed. A value a stored job already holds is
kept by an edit. Where plain credentials remain, a caller without the ``write`` scope reads them
as ``***``; a writer reads them as stored."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import httpx
import pytest

from cronwheel.auth.identity import Scope
from cronwheel.jobs.service import TargetPolicy
from cronwheel.model import HttpTarget, NatsTarget, SecretRef
from cronwheel.store import JobQuery
from cronwheel.store.port import StoredSecret
from cronwheel.targets.kinds import masked_credentials, plain_credentials

from .conftest import Env, issue_token, job_body

SECRET = "s3cr3t-v4lue"


def http(url: str = "https://hooks.example.com/x", **headers: Any) -> dict[str, Any]:
    return {"type": "http", "url": url, "headers": headers}


# (target, the field refused)
REFUSED: list[tuple[dict[str, Any], str]] = [
    (http(Authorization=f"Bearer {SECRET}"), "target.headers.Authorization"),
    (http(**{"X-Api-Key": SECRET}), "target.headers.X-Api-Key"),
    (http(Cookie=f"session={SECRET}"), "target.headers.Cookie"),
    (http(**{"X-Hook-Token": SECRET}), "target.headers.X-Hook-Token"),
    (http(f"https://bot:{SECRET}@hooks.example.com/x"), "target.url"),
    (http(f"https://hooks.example.com/x?token={SECRET}"), "target.url"),
    (http(f"https://hooks.example.com/x?api_key={SECRET}&a=1"), "target.url"),
    ({"type": "nats", "url": "nats://n.example.com:4222", "subject": "a", "user": "svc", "password": SECRET},
     "target.password"),
    ({"type": "nats", "url": "nats://n.example.com:4222", "subject": "a", "token": SECRET}, "target.token"),
    ({"type": "mqtt", "url": "mqtt://m.example.com:1883", "topic": "a", "username": "svc",
      "password": SECRET}, "target.password"),
    ({"type": "rabbitmq", "url": "amqp://mq.example.com/", "routing_key": "k", "username": "svc",
      "password": SECRET}, "target.password"),
    ({"type": "kafka", "bootstrap_servers": ["k.example.com:9092"], "topic": "t", "sasl_mechanism": "PLAIN",
      "username": "svc", "password": SECRET}, "target.password"),
    ({"type": "rabbitmq", "url": "amqp://mq.example.com/", "routing_key": "k",
      "headers": {"Authorization": SECRET}}, "target.headers.Authorization"),
    ({"type": "grpc", "address": "g.example.com:443", "method": "a.B/C",
      "metadata": {"authorization": f"Bearer {SECRET}"}}, "target.metadata.authorization"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("target", "field"), REFUSED, ids=[field + str(i) for i, (_, field) in enumerate(REFUSED)]
)
async def test_refused_by_default(
    client: httpx.AsyncClient, env: Env, target: dict[str, Any], field: str
) -> None:
    response = await client.post("/v1/jobs", json=job_body(target=target))
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert problem["type"].endswith("plain-credential")
    assert [(entry["field"], entry["code"]) for entry in problem["errors"]] == [(field, "plain_credential")]
    assert '{"secret": NAME}' in problem["detail"]
    assert "--allow-plain-credentials" in problem["detail"]
    assert SECRET not in response.text
    assert (await env.store.list_jobs(JobQuery())).items == []
    validated = await client.post("/v1/jobs:validate", json=job_body(target=target))
    assert validated.status_code == 422, validated.text


@pytest.mark.parametrize(("target", "field"), REFUSED[:3])
async def test_accepted_when_the_operator_allows_them(
    client: httpx.AsyncClient, env: Env, target: dict[str, Any], field: str
) -> None:
    env.service.policy = replace(env.service.policy, allow_plain_credentials=True)
    response = await client.post("/v1/jobs", json=job_body(target=target))
    assert response.status_code == 201, response.text


async def test_secret_references_and_other_values_are_accepted(client: httpx.AsyncClient, env: Env) -> None:
    await env.store.put_secret(StoredSecret("data", "hook-token", "k1", b"sealed"))
    target = http(
        "https://hooks.example.com/x?tenant=7",
        Authorization={"secret": "hook-token"},
        **{"X-Team": "data", "Content-Type": "text/plain"},
    )
    response = await client.post("/v1/jobs", json=job_body(target=target))
    assert response.status_code == 201, response.text


async def stored_plain(client: httpx.AsyncClient, env: Env) -> dict[str, Any]:
    """A job with plain credentials, written while they were allowed, on a server that now refuses
    them (as after an upgrade): its id and definition."""
    env.service.policy = replace(env.service.policy, allow_plain_credentials=True)
    target = http(f"https://hooks.example.com/x?token={SECRET}&tenant=7", Authorization=SECRET)
    target["headers"]["X-Team"] = "data"
    created = await client.post("/v1/jobs", json=job_body(target=target))
    assert created.status_code == 201, created.text
    env.service.policy = TargetPolicy(python_allow=("myapp.*",))
    assert not env.service.policy.allow_plain_credentials  # the default
    job: dict[str, Any] = created.json()
    return job


async def test_an_edit_keeps_the_stored_values(client: httpx.AsyncClient, env: Env) -> None:
    job = await stored_plain(client, env)
    path = f"/v1/jobs/{job['id']}"
    patched = await client.patch(path, json={"description": "v2"})
    assert patched.status_code == 200, patched.text
    read = (await client.get(path)).json()  # an admin: sees the values, and writes them back
    assert read["target"] == job["target"]
    body = {key: read[key] for key in job_body()} | {"description": "v3"}
    put = await client.put(path, json=body)
    assert put.status_code == 200, put.text
    stored = await env.store.get_job(job["id"])
    assert isinstance(stored.target, HttpTarget)
    assert dict(stored.target.headers)["Authorization"] == SECRET


async def test_a_changed_or_added_value_is_refused(client: httpx.AsyncClient, env: Env) -> None:
    job = await stored_plain(client, env)
    path = f"/v1/jobs/{job['id']}"
    changed = {**job["target"], "headers": {**job["target"]["headers"], "Authorization": "Bearer other"}}
    response = await client.patch(path, json={"target": changed})
    assert response.status_code == 422, response.text
    assert [entry["field"] for entry in response.json()["errors"]] == ["target.headers.Authorization"]
    added = {**job["target"], "headers": {**job["target"]["headers"], "X-Api-Key": "k"}}
    response = await client.patch(path, json={"target": added})
    assert [entry["field"] for entry in response.json()["errors"]] == ["target.headers.X-Api-Key"]


@pytest.mark.parametrize("scopes", [(Scope.READ,), (Scope.READ, Scope.TRIGGER)])
async def test_a_reader_sees_them_masked(
    client: httpx.AsyncClient, env: Env, scopes: tuple[Scope, ...]
) -> None:
    job = await stored_plain(client, env)
    reader = await issue_token(env.store, *scopes, team="data", name="reader")
    async with env.client(reader) as http_reader:
        one = await http_reader.get(f"/v1/jobs/{job['id']}")
        by_name = await http_reader.get("/v1/teams/data/jobs/nightly")
        listed = await http_reader.get("/v1/jobs", params={"include": "recent"})
    for response in (one, by_name, listed):
        assert response.status_code == 200, response.text
        assert SECRET not in response.text
    target = one.json()["target"]
    assert target["headers"] == {"Authorization": "***", "X-Team": "data"}
    assert target["url"] == "https://hooks.example.com/x?token=***&tenant=***"
    assert listed.json()["items"][0]["target"] == target == by_name.json()["target"]
    assert one.json()["plain_values"] == job["plain_values"]


async def test_a_writer_sees_them(client: httpx.AsyncClient, env: Env) -> None:
    job = await stored_plain(client, env)
    writer = await issue_token(env.store, Scope.READ, Scope.WRITE, team="data", name="writer")
    async with env.client(writer) as http_writer:
        read = await http_writer.get(f"/v1/jobs/{job['id']}")
    assert read.json()["target"] == job["target"]
    assert SECRET in read.text


def test_masking_keeps_references_and_other_values() -> None:
    target = NatsTarget(
        "nats://n.example.com:4222",
        "a",
        headers=(("X-Token", "t"), ("X-Team", "b")),
        user="svc",
        password="pw",
    )
    assert plain_credentials(target) == [("target.headers.X-Token", "t"), ("target.password", "pw")]
    assert masked_credentials(target) == replace(
        target, headers=(("X-Token", "***"), ("X-Team", "b")), password="***"
    )
    referenced = replace(target, headers=(("X-Token", SecretRef("t")),), password=SecretRef("pw"))
    assert plain_credentials(referenced) == []
    assert masked_credentials(referenced) is referenced
