"""The gRPC management API, ``cronwheel.v1`` (proto/cronwheel/v1, docs/grpc.md), beside REST.

:func:`grpc_server` builds a ``grpc.aio`` server with the six ``cronwheel.v1`` services
(:mod:`cronwheel.grpc_api.servicers`), the standard health service (``grpc.health.v1``:
SERVING while it runs, NOT_SERVING once it stops) and server reflection (so that ``grpcurl``
and other clients can list and describe the services without the proto files). Every method
authenticates as REST does and calls the same operations (:mod:`cronwheel.api.operations`):
REST and gRPC only translate. :func:`serve_grpc` runs one until a stop event, then stops it
gracefully (calls in flight get a grace period).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from dataclasses import dataclass

import grpc
from grpc_health.v1 import _async as health_aio  # the grpc.aio HealthServicer (health.aio)
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection

from cronwheel.api.services import ApiServices
from cronwheel.errors import PermanentError
from cronwheel.grpc_api import servicers
from cronwheel.grpc_api.calls import MethodNames
from cronwheel.tls import ServerTls
from cronwheel.v1 import (
    calendars_pb2,
    calendars_pb2_grpc,
    cluster_pb2,
    cluster_pb2_grpc,
    jobs_pb2,
    jobs_pb2_grpc,
    runs_pb2,
    runs_pb2_grpc,
    schedules_pb2,
    schedules_pb2_grpc,
    secrets_pb2,
    secrets_pb2_grpc,
    tokens_pb2,
    tokens_pb2_grpc,
)

log = logging.getLogger("cronwheel.grpc")

SERVICES = tuple(
    module.DESCRIPTOR.services_by_name[name].full_name
    for module, name in (
        (jobs_pb2, "JobService"),
        (runs_pb2, "RunService"),
        (schedules_pb2, "ScheduleService"),
        (cluster_pb2, "ClusterService"),
        (tokens_pb2, "TokenService"),
        (secrets_pb2, "SecretService"),
        (calendars_pb2, "CalendarService"),
    )
)
GRACE_S = 5.0  # calls in flight when the server stops get this long to finish


@dataclass(frozen=True, slots=True)
class GrpcServer:
    """A started server, the port it listens on, and its health service."""

    server: grpc.aio.Server
    port: int
    health: health_aio.HealthServicer


def _credentials(tls: ServerTls) -> grpc.ServerCredentials:
    tls.context()  # the files are checked (and refused, naming the option) as HTTPS checks them
    with open(tls.cert, "rb") as cert, open(tls.key, "rb") as key:
        chain = [(key.read(), cert.read())]
    if tls.client_ca is None:
        return grpc.ssl_server_credentials(chain)
    with open(tls.client_ca, "rb") as ca:
        return grpc.ssl_server_credentials(chain, ca.read(), require_client_auth=True)


async def grpc_server(
    services: ApiServices, host: str, port: int, tls: ServerTls | None = None
) -> GrpcServer:
    """A started server of ``services`` on ``host``:``port`` (0: any free port)."""
    limit = services.limits.max_body_bytes
    server = grpc.aio.server(
        interceptors=[MethodNames()],
        options=[("grpc.max_receive_message_length", limit), ("grpc.so_reuseport", 0)],
    )
    jobs_pb2_grpc.add_JobServiceServicer_to_server(servicers.JobServicer(services), server)
    runs_pb2_grpc.add_RunServiceServicer_to_server(servicers.RunServicer(services), server)
    schedules_pb2_grpc.add_ScheduleServiceServicer_to_server(servicers.ScheduleServicer(services), server)
    cluster_pb2_grpc.add_ClusterServiceServicer_to_server(servicers.ClusterServicer(services), server)
    tokens_pb2_grpc.add_TokenServiceServicer_to_server(servicers.TokenServicer(services), server)
    secrets_pb2_grpc.add_SecretServiceServicer_to_server(servicers.SecretServicer(services), server)
    calendars_pb2_grpc.add_CalendarServiceServicer_to_server(servicers.CalendarServicer(services), server)
    checker = health_aio.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(checker, server)
    reflection.enable_server_reflection((*SERVICES, health.SERVICE_NAME, reflection.SERVICE_NAME), server)
    address = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    try:
        bound = (
            server.add_secure_port(address, _credentials(tls)) if tls else server.add_insecure_port(address)
        )
    except RuntimeError as error:
        raise PermanentError(f"cannot listen on {address} for gRPC: {error} (see --grpc-port)") from None
    await server.start()
    for name in ("", *SERVICES):
        await checker.set(name, health_pb2.HealthCheckResponse.SERVING)
    return GrpcServer(server, bound, checker)


async def serve_grpc(
    services: ApiServices,
    host: str,
    port: int,
    stop: asyncio.Event,
    tls: ServerTls | None = None,
    started: Callable[[int], None] | None = None,
) -> None:
    """Serve until ``stop`` is set, then stop gracefully (health says NOT_SERVING first)."""
    running = await grpc_server(services, host, port, tls)
    try:
        log.info("action=grpc_serving port=%d", running.port)
        if started is not None:
            started(running.port)
        await stop.wait()
    finally:
        await running.health.enter_graceful_shutdown()
        await running.server.stop(GRACE_S)
