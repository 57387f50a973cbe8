"""`cronwheel server --grpc-port`: the real process serves the gRPC API beside REST, over the same
store and tokens (a job created over gRPC is read over REST), with health SERVING, and stops it
gracefully on SIGTERM (exit 0, the port closed)."""

from __future__ import annotations

import re
from collections.abc import Callable

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from server_harness import ServerProcess, wait_for

from cronwheel.v1 import jobs_pb2, jobs_pb2_grpc, targets_pb2

GRPC_LINE = re.compile(r"gRPC API on 127\.0\.0\.1:(\d+) \(plaintext")


async def test_the_server_serves_grpc_beside_rest(server_factory: Callable[..., ServerProcess]) -> None:
    server = server_factory("--grpc-port", "0")
    found = await wait_for(lambda: GRPC_LINE.search(server.log.read_text()))
    target = f"127.0.0.1:{found.group(1)}"
    metadata = (("authorization", server.headers["Authorization"]),)
    async with grpc.aio.insecure_channel(target) as channel:
        health = await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest())
        assert health.status == health_pb2.HealthCheckResponse.SERVING
        target_spec = targets_pb2.Target(http=targets_pb2.HttpTarget(url="http://127.0.0.1:9/hook"))
        spec = jobs_pb2.JobSpec(team="ops", name="from-grpc", schedule="0 3 * * *", target=target_spec)
        created = await jobs_pb2_grpc.JobServiceStub(channel).CreateJob(
            jobs_pb2.CreateJobRequest(job=spec), metadata=metadata
        )
    async with server.client() as api:
        answer = await api.get(f"/v1/jobs/{created.id}")
    assert answer.status_code == 200
    assert answer.json()["name"] == "from-grpc"
    assert server.stop() == 0
    async with grpc.aio.insecure_channel(target) as channel:
        with pytest.raises(grpc.aio.AioRpcError) as closed:
            await health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=2)
    assert closed.value.code() in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED)
