"""The two AMQP clients alone, publishing with confirms (a benchmark, not a test): what the
RabbitMQ executor's choice of aiormq over aio-pika rests on (docs/dependencies.md). The executor
itself is measured beside every other target type by ``bench_targets.py``.

Method. One connection and one channel in publisher-confirm mode per library, on the RabbitMQ at
127.0.0.1:5672 (guest/guest); each publishes the same small JSON message (persistent, with a
message id, ``mandatory``) to a queue of this run through the default exchange, N one at a time
(``sequential``) and N in batches of 64 (``concurrent``), timed from the first publish to the last
confirmation; every message must be confirmed (``basic.ack``). Each figure is the median of
``--rounds`` rounds (the queue is purged between them, and deleted after). RabbitMQ shares this
2-core machine: read the figures as this machine's.

    .venv/bin/python benchmarks/bench_amqp_clients.py              # N=2000, 5 rounds
    .venv/bin/python benchmarks/bench_amqp_clients.py --smoke      # tiny sizes (figures mean nothing)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import time
import uuid
from collections.abc import Awaitable, Callable

import aio_pika
import aiormq
from pamqp import commands as spec

AMQP_URL = os.environ.get("CRONWHEEL_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/")
BODY = json.dumps({"report": "nightly", "n": 1}, separators=(",", ":")).encode()
CONCURRENCY = 64

Publish = Callable[[int], Awaitable[bool]]


async def _rate(publish: Publish, count: int, concurrency: int) -> float:
    started = time.perf_counter()
    for first in range(0, count, concurrency):
        batch = range(first, min(first + concurrency, count))
        results = await asyncio.gather(*(publish(index) for index in batch))
        assert all(results), "a message was not confirmed"
    return count / (time.perf_counter() - started)


async def _main(count: int, rounds: int) -> dict[str, dict[str, float]]:
    queue = f"bench-{uuid.uuid4().hex[:8]}"
    admin = await aiormq.connect(AMQP_URL)
    admin_channel = await admin.channel()
    await admin_channel.queue_declare(queue)
    raw = await aiormq.connect(AMQP_URL)
    raw_channel = await raw.channel(publisher_confirms=True, on_return_raises=True)
    pika = await aio_pika.connect(AMQP_URL)
    pika_channel = await pika.channel(publisher_confirms=True, on_return_raises=True)
    try:

        async def by_aiormq(index: int) -> bool:
            properties = spec.Basic.Properties(
                content_type="application/json", delivery_mode=2, message_id=f"run-{index}"
            )
            confirmation = await raw_channel.basic_publish(
                BODY, routing_key=queue, properties=properties, mandatory=True
            )
            return isinstance(confirmation, spec.Basic.Ack)

        async def by_aio_pika(index: int) -> bool:
            message = aio_pika.Message(
                BODY, content_type="application/json", delivery_mode=2, message_id=f"run-{index}"
            )
            confirmation = await pika_channel.default_exchange.publish(
                message, routing_key=queue, mandatory=True
            )
            return isinstance(confirmation, spec.Basic.Ack)

        clients: dict[str, Publish] = {"aiormq": by_aiormq, "aio-pika": by_aio_pika}
        figures: dict[str, dict[str, list[float]]] = {
            name: {"sequential": [], "concurrent": []} for name in clients
        }
        for _ in range(rounds):
            for name, publish in clients.items():  # interleaved: a busy moment of the machine hits both
                for mode, concurrency in (("sequential", 1), ("concurrent", CONCURRENCY)):
                    figures[name][mode].append(await _rate(publish, count, concurrency))
                    await admin_channel.queue_purge(queue)
        return {
            name: {mode: statistics.median(values) for mode, values in modes.items()}
            for name, modes in figures.items()
        }
    finally:
        await raw.close()
        await pika.close()
        await admin_channel.queue_delete(queue)
        await admin.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=2000, help="messages per figure")
    parser.add_argument("--rounds", type=int, default=5, help="rounds; each figure is their median")
    parser.add_argument("--smoke", action="store_true", help="tiny sizes (CI; figures mean nothing)")
    parser.add_argument("--json", metavar="PATH", help="also write the figures here")
    args = parser.parse_args()
    count, rounds = (64, 1) if args.smoke else (args.runs, args.rounds)
    results = asyncio.run(_main(count, rounds))
    print(f"messages/s confirmed, median of {rounds} round(s) of {count}")
    print(f"{'client':<10} {'sequential':>12} {'concurrent 64':>14}")
    for name, modes in results.items():
        print(f"{name:<10} {modes['sequential']:>12,.0f} {modes['concurrent']:>14,.0f}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump({"count": count, "rounds": rounds, "results": results}, out, indent=2)


if __name__ == "__main__":
    main()
