"""Executors: perform one attempt of a run against its target (HTTP, command, Python function,
a gRPC method, a NATS subject, an MQTT topic, a RabbitMQ exchange, a Kafka topic).

:class:`Executors` is what a worker holds: one executor per target type, dispatched by
``target.type``, closed together. Each executor turns everything its target does into an
:class:`~cronwheel.store.port.AttemptResult`, whose texts are then made storable
(:func:`~cronwheel.worker.executors.base.storable`); a bug inside an executor is logged and
reported as ``Outcome.ERROR`` rather than crashing the worker's loop. ``secrets`` resolves the
team secrets that HTTP headers, command environments, webhook signatures and broker headers and
credentials refer to (without
one, a target that refers to a secret fails its attempts, saying so).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from cronwheel.clock import Clock
from cronwheel.model import AttemptResult, Outcome, Target
from cronwheel.secrets.resolve import SecretResolver
from cronwheel.worker.executors.base import AttemptContext, Executor, WorkerSettings, rfc3339, storable
from cronwheel.worker.executors.command import CommandExecutor
from cronwheel.worker.executors.grpc import GrpcExecutor
from cronwheel.worker.executors.http import HttpExecutor, address_refusal
from cronwheel.worker.executors.kafka import KafkaExecutor
from cronwheel.worker.executors.mqtt import MqttExecutor
from cronwheel.worker.executors.nats import NatsExecutor
from cronwheel.worker.executors.python import PythonExecutor
from cronwheel.worker.executors.rabbitmq import RabbitMqExecutor

__all__ = [
    "AttemptContext",
    "CommandExecutor",
    "Executor",
    "Executors",
    "GrpcExecutor",
    "HttpExecutor",
    "KafkaExecutor",
    "MqttExecutor",
    "NatsExecutor",
    "PythonExecutor",
    "RabbitMqExecutor",
    "WorkerSettings",
    "address_refusal",
    "rfc3339",
]

log = logging.getLogger(__name__)


class Executors:
    """The worker's executors, one per target type."""

    def __init__(
        self,
        settings: WorkerSettings | None = None,
        *,
        clock: Clock | None = None,
        overrides: Mapping[str, Executor[Any]] | None = None,
        secrets: SecretResolver | None = None,
    ) -> None:
        self.settings = settings or WorkerSettings()
        self._by_kind: dict[str, Executor[Any]] = {
            "http": HttpExecutor(self.settings, clock=clock, secrets=secrets),
            "command": CommandExecutor(self.settings, clock=clock, secrets=secrets),
            "python": PythonExecutor(self.settings, clock=clock),
            "grpc": GrpcExecutor(self.settings, clock=clock, secrets=secrets),
            "nats": NatsExecutor(self.settings, clock=clock, secrets=secrets),
            "mqtt": MqttExecutor(self.settings, clock=clock, secrets=secrets),
            "rabbitmq": RabbitMqExecutor(self.settings, clock=clock, secrets=secrets),
            "kafka": KafkaExecutor(self.settings, clock=clock, secrets=secrets),
        }
        self._by_kind.update(overrides or {})

    def __getitem__(self, kind: str) -> Executor[Any]:
        return self._by_kind[kind]

    async def execute(self, target: Target, ctx: AttemptContext) -> AttemptResult:
        executor = self._by_kind.get(target.type)
        if executor is None:
            return AttemptResult(Outcome.ERROR, error=f"no executor for {target.type!r} targets")
        try:
            return storable(await executor.execute(target, ctx))
        except Exception as exc:
            log.exception("executor for %s targets failed (run %s)", target.type, ctx.execution_id)
            return AttemptResult(Outcome.ERROR, error=f"internal executor error: {type(exc).__name__}")

    async def close(self) -> None:
        for executor in self._by_kind.values():
            try:
                await executor.close()
            except Exception:
                log.exception("closing an executor failed")
