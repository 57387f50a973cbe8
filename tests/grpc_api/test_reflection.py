"""What a grpcurl user sees: the services listed through server reflection (grpc_reflection's
client, as ``grpcurl -plaintext HOST:PORT list`` does), a method described from the descriptors
reflection serves, and the standard health check SERVING."""

from __future__ import annotations

import asyncio

import grpc
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

from cronwheel.grpc_api import SERVICES
from grpc_api.conftest import Env


def _list_and_describe(target: str) -> tuple[list[str], tuple[str, str, str]]:
    """``grpcurl list`` and ``grpcurl describe cronwheel.v1.JobService.TriggerJob`` (blocking)."""
    with grpc.insecure_channel(target) as channel:
        database = ProtoReflectionDescriptorDatabase(channel)
        services = sorted(database.get_services())
        pool = DescriptorPool(database)
        method = pool.FindServiceByName("cronwheel.v1.JobService").methods_by_name["TriggerJob"]
        return services, (method.full_name, method.input_type.full_name, method.output_type.full_name)


async def test_reflection_lists_the_services_and_describes_a_method(env: Env) -> None:
    services, method = await asyncio.to_thread(_list_and_describe, env.target)
    assert set(SERVICES) <= set(services)
    assert {"grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection"} <= set(services)
    assert method == (
        "cronwheel.v1.JobService.TriggerJob",
        "cronwheel.v1.TriggerJobRequest",
        "cronwheel.v1.TriggerJobResponse",
    )


async def test_health_is_serving_and_no_token_is_needed(env: Env, channel: grpc.aio.Channel) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    for service in ("", "cronwheel.v1.JobService"):
        answer = await health.Check(health_pb2.HealthCheckRequest(service=service))
        assert answer.status == health_pb2.HealthCheckResponse.SERVING
