"""Deliveries per second through one executor: RabbitMQ with publisher confirms beside HTTP
(a benchmark, not a test; issue #14, "deliveries per second ... beside HTTP in one run").

Method. In this process, one executor of each kind makes N attempts (``execute``), one at a time
(``sequential``) and N at a time in batches of 64 (``concurrent``), timed from the first call to
the last result; every attempt must succeed. Targets:

* ``http``: :class:`~cronwheel.worker.executors.http.HttpExecutor` POSTing the payload to a no-op
  aiohttp sink (``200 ok``) on 127.0.0.1, served by a child process so that its CPU is not the
  executor's;
* ``rabbitmq``: :class:`~cronwheel.worker.executors.rabbitmq.RabbitMqExecutor` publishing to the
  default exchange, routed to a queue of this run (deleted after), on the RabbitMQ at
  127.0.0.1:5672 (guest/guest), each message confirmed by the broker;
* ``aiormq`` and ``aio-pika``: the two libraries alone, no cronwheel, each publishing the same
  message with confirms and ``mandatory`` on one channel: what the executor's choice of aiormq
  rests on.

The payload is ``{"report": "nightly", "n": 1}``; the SSRF guard allows loopback as the tests do.
Each figure is the median of ``--rounds`` rounds (the queue is purged between them). RabbitMQ and
the sink share this 2-core machine with the executor: read the figures as this machine's.

    .venv/bin/python benchmarks/bench_broker_targets.py              # N=2000, 5 rounds
    .venv/bin/python benchmarks/bench_broker_targets.py --smoke      # tiny sizes (figures mean nothing)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import socket
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime

import aio_pika
import aiormq
from aiohttp import web
from pamqp import commands as spec

from cronwheel.model import HttpTarget, Outcome, RabbitMqTarget
from cronwheel.worker.executors import AttemptContext, WorkerSettings
from cronwheel.worker.executors.http import HttpExecutor
from cronwheel.worker.executors.rabbitmq import RabbitMqExecutor

AMQP_URL = os.environ.get("CRONWHEEL_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
LOOPBACK = WorkerSettings(allowed_networks=("127.0.0.0/8",))
PAYLOAD = {"report": "nightly", "n": 1}
CONCURRENCY = 64


def _serve(port: int) -> None:
    async def ok(_: web.Request) -> web.Response:
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_post("/hook", ok)
    web.run_app(app, host="127.0.0.1", port=port, print=None, access_log=None)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _ctx(index: int) -> AttemptContext:
    return AttemptContext(
        execution_id=f"run-{index}",
        job_id="job-bench",
        job_name="bench",
        team="bench",
        scheduled_at=datetime(2026, 1, 1, tzinfo=UTC),
        attempt=1,
        timeout_s=30.0,
        payload=PAYLOAD,
    )


Attempt = Callable[[int], Awaitable[bool]]


async def _rate(attempt: Attempt, count: int, concurrency: int) -> float:
    started = time.perf_counter()
    for first in range(0, count, concurrency):
        batch = range(first, min(first + concurrency, count))
        results = await asyncio.gather(*(attempt(index) for index in batch))
        assert all(results), "an attempt did not succeed"
    return count / (time.perf_counter() - started)


@dataclass
class Subject:
    name: str
    attempt: Attempt
    between: Callable[[], Awaitable[None]]


async def _main(count: int, rounds: int) -> dict[str, dict[str, float]]:
    port = _free_port()
    sink = multiprocessing.get_context("spawn").Process(target=_serve, args=(port,), daemon=True)
    sink.start()
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    admin = await aiormq.connect(AMQP_URL)
    admin_channel = await admin.channel()
    await admin_channel.queue_declare(queue)
    http = HttpExecutor(LOOPBACK)
    rabbit = RabbitMqExecutor(LOOPBACK)
    raw = await aiormq.connect(AMQP_URL)
    raw_channel = await raw.channel(publisher_confirms=True, on_return_raises=True)
    pika = await aio_pika.connect(AMQP_URL)
    pika_channel = await pika.channel(publisher_confirms=True, on_return_raises=True)
    body = json.dumps(PAYLOAD, separators=(",", ":")).encode()
    try:
        await _wait_for(port)
        http_target = HttpTarget(url=f"http://127.0.0.1:{port}/hook")
        rabbit_target = RabbitMqTarget(url="amqp://127.0.0.1:5672/", routing_key=queue)

        async def by_http(index: int) -> bool:
            return (await http.execute(http_target, _ctx(index))).outcome is Outcome.SUCCESS

        async def by_rabbitmq(index: int) -> bool:
            return (await rabbit.execute(rabbit_target, _ctx(index))).outcome is Outcome.SUCCESS

        async def by_aiormq(index: int) -> bool:
            properties = spec.Basic.Properties(
                content_type="application/json", delivery_mode=2, message_id=f"run-{index}"
            )
            confirmation = await raw_channel.basic_publish(
                body, routing_key=queue, properties=properties, mandatory=True
            )
            return isinstance(confirmation, spec.Basic.Ack)

        async def by_aio_pika(index: int) -> bool:
            message = aio_pika.Message(
                body, content_type="application/json", delivery_mode=2, message_id=f"run-{index}"
            )
            confirmation = await pika_channel.default_exchange.publish(
                message, routing_key=queue, mandatory=True
            )
            return isinstance(confirmation, spec.Basic.Ack)

        async def purge() -> None:
            await admin_channel.queue_purge(queue)

        async def nothing() -> None:
            return None

        subjects = [
            Subject("http", by_http, nothing),
            Subject("rabbitmq", by_rabbitmq, purge),
            Subject("aiormq", by_aiormq, purge),
            Subject("aio-pika", by_aio_pika, purge),
        ]
        figures: dict[str, dict[str, list[float]]] = {
            s.name: {"sequential": [], "concurrent": []} for s in subjects
        }
        await _rate(by_http, min(count, 50), CONCURRENCY)  # warm-up: connections opened
        await _rate(by_rabbitmq, min(count, 50), CONCURRENCY)
        for _ in range(rounds):
            for subject in subjects:  # interleaved, so that a busy moment of the machine hits all
                for mode, concurrency in (("sequential", 1), ("concurrent", CONCURRENCY)):
                    figures[subject.name][mode].append(await _rate(subject.attempt, count, concurrency))
                    await subject.between()
        return {
            name: {mode: statistics.median(values) for mode, values in modes.items()}
            for name, modes in figures.items()
        }
    finally:
        await http.close()
        await rabbit.close()
        await raw.close()
        await pika.close()
        await admin_channel.queue_delete(queue)
        await admin.close()
        sink.terminate()
        sink.join(5)


async def _wait_for(port: int) -> None:
    for _ in range(200):
        try:
            _, writer = await asyncio.open_connection("127.0.0.1", port)
            writer.close()
            return
        except OSError:
            await asyncio.sleep(0.05)
    raise RuntimeError("the sink did not start")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000, help="attempts per figure")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; each figure is their median")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (CI; figures mean nothing)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures here")
    args = parser.parse_args()
    count, rounds = (64, 1) if args.smoke else (args.runs, args.rounds)
    results = asyncio.run(_main(count, rounds))
    print(f"deliveries/s through one executor, median of {rounds} round(s) of {count} attempts")
    print(f"{'target':<10} {'sequential':>12} {'concurrent 64':>14}")
    for name, modes in results.items():
        print(f"{name:<10} {modes['sequential']:>12,.0f} {modes['concurrent']:>14,.0f}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"count": count, "rounds": rounds, "results": results}, out, indent=2)


if __name__ == "__main__":
    main()
