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

import asyncio
import logging
from collections.abc import Callable, Mapping
from typing import Any

from cronwheel.clock import Clock
from cronwheel.model import AttemptResult, Outcome, Target
from cronwheel.secrets.resolve import SecretResolver
from cronwheel.worker.executors.base import AttemptContext, Executor, WorkerSettings, rfc3339, storable
from cronwheel.worker.executors.command import CommandExecutor
from cronwheel.worker.executors.http import HttpExecutor, address_refusal
from cronwheel.worker.executors.python import PythonExecutor

__all__ = [
    "EXECUTORS",
    "AttemptContext",
    "CommandExecutor",
    "Executor",
    "Executors",
    "HttpExecutor",
    "PythonExecutor",
    "WorkerSettings",
    "address_refusal",
    "rfc3339",
]

log = logging.getLogger(__name__)

Build = Callable[[WorkerSettings, Clock | None, SecretResolver | None], Executor[Any]]


def _grpc(settings: WorkerSettings, clock: Clock | None, secrets: SecretResolver | None) -> Executor[Any]:
    from cronwheel.worker.executors.grpc import GrpcExecutor  # noqa: PLC0415 - grpc on demand

    return GrpcExecutor(settings, clock=clock, secrets=secrets)


def _nats(settings: WorkerSettings, clock: Clock | None, secrets: SecretResolver | None) -> Executor[Any]:
    from cronwheel.worker.executors.nats import NatsExecutor  # noqa: PLC0415 - nats-py on demand

    return NatsExecutor(settings, clock=clock, secrets=secrets)


def _mqtt(settings: WorkerSettings, clock: Clock | None, secrets: SecretResolver | None) -> Executor[Any]:
    from cronwheel.worker.executors.mqtt import MqttExecutor  # noqa: PLC0415 - aiomqtt on demand

    return MqttExecutor(settings, clock=clock, secrets=secrets)


def _rabbitmq(settings: WorkerSettings, clock: Clock | None, secrets: SecretResolver | None) -> Executor[Any]:
    from cronwheel.worker.executors.rabbitmq import RabbitMqExecutor  # noqa: PLC0415 - aiormq on demand

    return RabbitMqExecutor(settings, clock=clock, secrets=secrets)


def _kafka(settings: WorkerSettings, clock: Clock | None, secrets: SecretResolver | None) -> Executor[Any]:
    from cronwheel.worker.executors.kafka import KafkaExecutor  # noqa: PLC0415 - aiokafka on demand

    return KafkaExecutor(settings, clock=clock, secrets=secrets)


EXECUTORS: dict[str, Build] = {
    "http": lambda settings, clock, secrets: HttpExecutor(settings, clock=clock, secrets=secrets),
    "command": lambda settings, clock, secrets: CommandExecutor(settings, clock=clock, secrets=secrets),
    "python": lambda settings, clock, _: PythonExecutor(settings, clock=clock),
    "grpc": _grpc,
    "nats": _nats,
    "mqtt": _mqtt,
    "rabbitmq": _rabbitmq,
    "kafka": _kafka,
}
"""How to make each target kind's executor. A broker's or gRPC's executor module, and the client
library it imports, is loaded when the first one is made (a worker whose jobs publish to no broker
loads no broker client)."""


class Executors:
    """The worker's executors, one per target type, each made when first used."""

    def __init__(
        self,
        settings: WorkerSettings | None = None,
        *,
        clock: Clock | None = None,
        overrides: Mapping[str, Executor[Any]] | None = None,
        secrets: SecretResolver | None = None,
    ) -> None:
        self.settings = settings or WorkerSettings()
        self._clock = clock
        self._secrets = secrets
        self._by_kind: dict[str, Executor[Any]] = dict(overrides or {})

    def __getitem__(self, kind: str) -> Executor[Any]:
        """The executor of ``kind`` (KeyError: no such kind), made now if it was not yet."""
        if kind not in self._by_kind:
            self._by_kind[kind] = EXECUTORS[kind](self.settings, self._clock, self._secrets)
        return self._by_kind[kind]

    async def _executor(self, kind: str) -> Executor[Any]:
        """The executor of ``kind``, one of :data:`EXECUTORS` or the overrides. The first one is
        made in a thread: importing its client library takes a few hundred milliseconds of CPU,
        during which the event loop (the scheduler's too, in one process) keeps running."""
        if kind not in self._by_kind:
            made = await asyncio.to_thread(EXECUTORS[kind], self.settings, self._clock, self._secrets)
            self._by_kind.setdefault(kind, made)  # an attempt that started meanwhile may have made one
        return self._by_kind[kind]

    async def execute(self, target: Target, ctx: AttemptContext) -> AttemptResult:
        if target.type not in self._by_kind and target.type not in EXECUTORS:
            return AttemptResult(Outcome.ERROR, error=f"no executor for {target.type!r} targets")
        try:
            executor = await self._executor(target.type)
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
