"""A target may not set a header the client writes (``Host``, ``Content-Length``, the hop-by-hop
headers of RFC 9110) nor one cronwheel sets on each attempt (``Idempotency-Key``, ``webhook-*``,
``X-Cronwheel-*``, the trace context): a 422 naming the header (``target.headers.Host``), in any
case, for HTTP and broker headers and gRPC metadata alike, nothing stored. Stored jobs that set
one are in tests/worker/test_stored_targets.py (a client header fails the attempt) and
tests/worker/test_http_executor.py (cronwheel's own values win)."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from cronwheel.store import JobQuery
from cronwheel.targets.checks import reserved_header

from .conftest import Env, job_body

HTTP_REFUSED = [
    "Host", "host", "HOST", "Content-Length", "Connection", "Transfer-Encoding", "Keep-Alive",
    "Proxy-Connection", "TE", "Trailer", "Upgrade", "Idempotency-Key", "webhook-id", "Webhook-Timestamp",
    "webhook-signature", "X-Cronwheel-Job-Id", "x-cronwheel-attempt", "X-Cronwheel-Anything", "traceparent",
    "tracestate",
]  # fmt: skip


def http(headers: dict[str, Any]) -> dict[str, Any]:
    return {"type": "http", "url": "https://hooks.example.com/x", "headers": headers}


async def refused(client: httpx.AsyncClient, env: Env, target: dict[str, Any], field: str) -> None:
    response = await client.post("/v1/jobs", json=job_body(target=target))
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert [entry["field"] for entry in problem["errors"]] == [field]
    assert "a target may not set it" in problem["detail"]
    assert "s3cr3t" not in response.text
    assert (await env.store.list_jobs(JobQuery())).items == []


@pytest.mark.parametrize("name", HTTP_REFUSED)
async def test_http_headers_refused(client: httpx.AsyncClient, env: Env, name: str) -> None:
    await refused(client, env, http({name: "s3cr3t"}), f"target.headers.{name}")


async def test_the_cloud_metadata_host_is_refused(client: httpx.AsyncClient, env: Env) -> None:
    await refused(client, env, http({"Host": "169.254.169.254"}), "target.headers.Host")


@pytest.mark.parametrize(
    ("target", "field"),
    [
        ({"type": "nats", "url": "nats://n.example.com:4222", "subject": "a",
          "headers": {"Nats-Msg-Id": "s3cr3t"}}, "target.headers.Nats-Msg-Id"),
        ({"type": "nats", "url": "nats://n.example.com:4222", "subject": "a",
          "headers": {"X-Cronwheel-Attempt": "s3cr3t"}}, "target.headers.X-Cronwheel-Attempt"),
        ({"type": "rabbitmq", "url": "amqp://mq.example.com/", "routing_key": "k",
          "headers": {"idempotency-key": "s3cr3t"}}, "target.headers.idempotency-key"),
        ({"type": "kafka", "bootstrap_servers": ["k.example.com:9092"], "topic": "t",
          "headers": {"Connection": "s3cr3t"}}, "target.headers.Connection"),
        ({"type": "grpc", "address": "g.example.com:443", "method": "a.B/C", "metadata": {"host": "s3cr3t"}},
         "target.metadata.host"),
        ({"type": "grpc", "address": "g.example.com:443", "method": "a.B/C", "metadata": {"te": "s3cr3t"}},
         "target.metadata.te"),
        ({"type": "grpc", "address": "g.example.com:443", "method": "a.B/C",
          "metadata": {"content-type": "s3cr3t"}}, "target.metadata.content-type"),
        ({"type": "grpc", "address": "g.example.com:443", "method": "a.B/C",
          "metadata": {"x-cronwheel-job-id": "s3cr3t"}}, "target.metadata.x-cronwheel-job-id"),
    ],
)  # fmt: skip
async def test_broker_headers_and_grpc_metadata_refused(
    client: httpx.AsyncClient, env: Env, target: dict[str, Any], field: str
) -> None:
    await refused(client, env, target, field)


async def test_a_patch_that_adds_one_is_refused(client: httpx.AsyncClient) -> None:
    created = await client.post("/v1/jobs", json=job_body(target=http({"X-Team": "blue"})))
    assert created.status_code == 201, created.text
    job = created.json()
    response = await client.patch(
        f"/v1/jobs/{job['id']}", json={"target": http({"X-Team": "blue", "Host": "169.254.169.254"})}
    )
    assert response.status_code == 422, response.text
    assert [entry["field"] for entry in response.json()["errors"]] == ["target.headers.Host"]
    assert (await client.get(f"/v1/jobs/{job['id']}")).json()["target"]["headers"] == {"X-Team": "blue"}


@pytest.mark.parametrize("name", ["Content-Type", "User-Agent", "Accept", "X-Team", "Accept-Language"])
async def test_other_headers_are_accepted(client: httpx.AsyncClient, name: str) -> None:
    response = await client.post("/v1/jobs", json=job_body(target=http({name: "text/plain"})))
    assert response.status_code == 201, response.text


def test_grpc_content_type_is_the_clients_but_an_http_target_may_set_it() -> None:
    assert reserved_header("content-type", grpc=True) is not None
    assert reserved_header("Content-Type") is None
