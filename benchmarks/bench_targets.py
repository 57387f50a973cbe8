"""Deliveries per second through one executor, per target type, in one run: HTTP to a no-op
aiohttp sink on loopback beside NATS, JetStream, MQTT QoS 1 and RabbitMQ with publisher confirms
on the brokers on loopback (Kafka: no broker here takes an idempotent producer, docs/service.md).

For each type: ``--deliveries`` attempts one after another (sequential), then the same number with
at most 64 in flight (concurrency 64), each repeated ``--rounds`` times; the median rate is
reported. One executor per type, warmed by one attempt (its connection is open). The JetStream
stream and the RabbitMQ queue are created for the run and deleted after. Every attempt must
succeed, or the run fails.

    .venv/bin/python benchmarks/bench_targets.py            # 2000 deliveries x 5 rounds
    .venv/bin/python benchmarks/bench_targets.py --smoke    # a few, to prove it runs
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any

import aiormq
import nats
from aiohttp import web
from nats.js.api import StreamConfig

from cronwheel.model import AttemptResult, HttpTarget, MqttTarget, NatsTarget, Outcome, RabbitMqTarget, Target
from cronwheel.worker.executors import AttemptContext, WorkerSettings
from cronwheel.worker.executors.http import HttpExecutor
from cronwheel.worker.executors.mqtt import MqttExecutor
from cronwheel.worker.executors.nats import NatsExecutor
from cronwheel.worker.executors.rabbitmq import RabbitMqExecutor

SETTINGS = WorkerSettings(allowed_networks=("127.0.0.0/8",))
SLOT = datetime(2026, 1, 1, tzinfo=UTC)


def ctx(n: int) -> AttemptContext:
    return AttemptContext(f"run-{n}", "job-bench", "bench", "bench", SLOT, 1, 10.0, payload={"n": n})


async def rate(execute: Callable[[int], Awaitable[AttemptResult]], count: int, concurrency: int) -> float:
    gate = asyncio.Semaphore(concurrency)
    failed: list[AttemptResult] = []

    async def one(n: int) -> None:
        async with gate:
            result = await execute(n)
            if result.outcome is not Outcome.SUCCESS:
                failed.append(result)

    started = time.perf_counter()
    await asyncio.gather(*(one(n) for n in range(count)))
    elapsed = time.perf_counter() - started
    if failed:
        raise SystemExit(f"{len(failed)} attempts failed, e.g. {failed[0]}")
    return count / elapsed


def _offset(
    execute: Callable[[int], Awaitable[AttemptResult]], base: int
) -> Callable[[int], Awaitable[AttemptResult]]:
    return lambda n: execute(base + n)


async def sink() -> tuple[web.AppRunner, int]:
    async def ok(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/", ok)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner, runner.addresses[0][1]


async def main(args: argparse.Namespace) -> dict[str, Any]:
    runner, port = await sink()
    stream = f"CWBENCH_{uuid.uuid4().hex[:8].upper()}"
    subject = f"cwbench.{uuid.uuid4().hex[:8]}"
    nc = await nats.connect(args.nats)
    js = nc.jetstream()
    await js.add_stream(StreamConfig(name=stream, subjects=[f"{subject}.js"], duplicate_window=120.0))
    amqp = await aiormq.connect(args.amqp_admin)
    amqp_channel = await amqp.channel()
    queue = f"cwbench-{uuid.uuid4().hex[:8]}"
    await amqp_channel.queue_declare(queue)
    executors = {
        "http": HttpExecutor(SETTINGS),
        "nats": NatsExecutor(SETTINGS),
        "mqtt": MqttExecutor(SETTINGS),
        "rabbitmq": RabbitMqExecutor(SETTINGS),
    }
    kinds: list[tuple[str, str, Target]] = [
        ("http", "http", HttpTarget(f"http://127.0.0.1:{port}/")),
        ("nats", "nats", NatsTarget(args.nats, f"{subject}.core")),
        ("jetstream", "nats", NatsTarget(args.nats, f"{subject}.js", jetstream=True)),
        ("mqtt qos1", "mqtt", MqttTarget(args.mqtt, f"cwbench/{uuid.uuid4().hex[:8]}", qos=1)),
        ("rabbitmq", "rabbitmq", RabbitMqTarget(args.amqp, routing_key=queue)),
    ]
    figures: dict[str, Any] = {}
    serial = 0
    try:
        for name, kind, target in kinds:
            executor: Any = executors[kind]

            async def execute(n: int, executor: Any = executor, target: Target = target) -> AttemptResult:
                result: AttemptResult = await executor.execute(target, ctx(n))
                return result

            await execute(-1)  # warm: the connection is open
            row = {}
            for concurrency in (1, 64):
                rates = []
                for _ in range(args.rounds):
                    base = serial
                    serial += args.deliveries  # every attempt a new run id (JetStream keeps them all)
                    rates.append(await rate(_offset(execute, base), args.deliveries, concurrency))
                row[f"c{concurrency}"] = round(statistics.median(rates))
            figures[name] = row
            print(f"{name:10s} sequential {row['c1']:>7}/s   concurrency 64 {row['c64']:>7}/s", flush=True)
    finally:
        for executor in executors.values():
            await executor.close()
        await js.delete_stream(stream)
        await amqp_channel.queue_delete(queue)
        await amqp.close()
        await nc.close()
        await runner.cleanup()
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="a few deliveries, one round")
    parser.add_argument("--deliveries", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--nats", default="nats://127.0.0.1:4222")
    parser.add_argument("--mqtt", default="mqtt://127.0.0.1:1883")
    parser.add_argument("--amqp", default="amqp://127.0.0.1:5672/", help="the target's URL (guest)")
    parser.add_argument(
        "--amqp-admin", default="amqp://guest:guest@127.0.0.1:5672/", help="to make the queue"
    )
    parser.add_argument("--out", "--json", help="write the medians as JSON here")
    options = parser.parse_args()
    if options.smoke:
        options.deliveries, options.rounds = 20, 1
    result = asyncio.run(main(options))
    if options.out:
        with open(options.out, "w") as file:
            json.dump(
                {"deliveries": options.deliveries, "rounds": options.rounds, "per_s": result}, file, indent=2
            )
