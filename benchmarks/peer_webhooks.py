"""The peers of ``bench_webhooks.py``: one worker process of taskiq or dramatiq POSTing to the sink.

Run by ``bench_webhooks.py`` (scenarios ``taskiq`` and ``dramatiq``) with the interpreter of
``.venv-peer-webhooks`` (``requirements/peer-webhooks.lock``), never imported by cronwheel. It speaks the
parent's protocol (``@bench`` lines on stdout, words on stdin): it enqueues ``--runs`` tasks on
its own Redis keys (not timed), says ``ready``, starts its worker at ``go`` and stops it at
``stop``, then reports its CPU seconds and peak RSS from ``go`` on.

Each task POSTs the same JSON body as cronwheel's worker, with ``Content-Type`` and an
``Idempotency-Key`` (the task's key), reads the response and fails on a non-2xx status; one
aiohttp session (the version of cronwheel's lock) serves the process. The peers record nothing:
no result backend, no run history. Tuning, as their documentation advises for I/O-bound work:

* taskiq: ``RedisStreamBroker`` (consumer group, XREADGROUP ``count`` 100, acknowledged after
  the task), one ``Receiver`` with ``max_async_tasks`` = concurrency in this process (what
  ``taskiq worker --workers 1 --max-async-tasks N`` runs, without its supervisor process);
* dramatiq: ``RedisBroker``, an ``async def`` actor run by the ``AsyncIO`` middleware's event
  loop, ``Worker(worker_threads=concurrency)`` so that as many tasks are in flight, prefetch the
  dramatiq default (twice the threads).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import resource
import sys
import threading
import uuid
from typing import Any

import aiohttp

TAG = "@bench "
BODY = b'{"bench":"webhooks"}'


def tell(word: str, data: Any = None) -> None:
    print(f"{TAG}{word} {json.dumps(data)}", flush=True)


def hear(word: str) -> None:
    line = sys.stdin.readline()
    if line.strip() != word:
        raise SystemExit(f"expected {word!r} from the parent, got {line!r}")


def cpu_now() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def reset_peak_rss() -> None:
    with open(f"/proc/{os.getpid()}/clear_refs", "w") as refs:
        refs.write("5")


def peak_rss_mb() -> float:
    with open(f"/proc/{os.getpid()}/status") as status:
        for line in status:
            if line.startswith("VmHWM:"):
                return round(int(line.split()[1]) / 1024, 1)
    return 0.0


class Poster:
    """One aiohttp session for the process, made on the loop that uses it."""

    def __init__(self, hook: str, concurrency: int) -> None:
        self.hook, self.concurrency = hook, concurrency
        self.session: aiohttp.ClientSession | None = None

    async def post(self, key: str) -> None:
        if self.session is None:
            connector = aiohttp.TCPConnector(limit=self.concurrency)
            self.session = aiohttp.ClientSession(connector=connector)
        headers = {"Content-Type": "application/json", "Idempotency-Key": key}
        async with self.session.post(self.hook, data=BODY, headers=headers) as response:
            await response.read()
            response.raise_for_status()

    async def close(self) -> None:
        if self.session is not None:
            await self.session.close()


def quiet_logs() -> None:
    """INFO logs, as a deployed worker logs, into nowhere: their cost counts, not their text."""
    logging.getLogger().handlers[:] = [logging.NullHandler()]
    logging.getLogger().setLevel(logging.INFO)


def measured(work: Any) -> None:
    """``ready``, then ``work(stop)`` from ``go`` until ``stop``; CPU and peak RSS reported."""
    tell("ready", None)
    hear("go")
    reset_peak_rss()
    before = cpu_now()
    stop = threading.Event()
    runner = threading.Thread(target=work, args=(stop,))
    runner.start()
    hear("stop")
    stop.set()
    runner.join(60)
    tell("result", {"cpu_s": cpu_now() - before, "peak_rss_mb": peak_rss_mb()})


# -- taskiq ---------------------------------------------------------------------------------------


def taskiq_main(args: argparse.Namespace) -> None:
    from taskiq.receiver import Receiver
    from taskiq_redis import RedisStreamBroker

    def broker() -> RedisStreamBroker:
        return RedisStreamBroker(args.redis, queue_name=f"{args.prefix}:taskiq", consumer_id="0")

    poster = Poster(args.hook, args.concurrency)
    sender = broker()

    async def post(key: str) -> None:
        await poster.post(key)

    deliver: Any = sender.task(task_name="deliver")(post)

    async def seed() -> None:
        await sender.startup()
        for start in range(0, args.runs, 500):
            keys = [uuid.uuid4().hex for _ in range(min(500, args.runs - start))]
            await asyncio.gather(*(deliver.kiq(key) for key in keys))
        await sender.shutdown()

    asyncio.run(seed())
    quiet_logs()

    def work(stop: threading.Event) -> None:
        async def listen() -> None:
            sender.is_worker_process = True
            finish = asyncio.Event()
            receiver = Receiver(sender, max_async_tasks=args.concurrency, wait_tasks_timeout=5)
            listening = asyncio.create_task(receiver.listen(finish))
            while not stop.is_set():
                await asyncio.sleep(0.05)
            finish.set()
            await asyncio.wait_for(listening, 10)
            await sender.shutdown()
            await poster.close()

        asyncio.run(listen())

    measured(work)


# -- dramatiq -------------------------------------------------------------------------------------


def dramatiq_main(args: argparse.Namespace) -> None:
    import dramatiq
    from dramatiq.brokers.redis import RedisBroker
    from dramatiq.middleware.asyncio import AsyncIO

    broker = RedisBroker(url=args.redis, namespace=f"{args.prefix}:dramatiq")
    broker.add_middleware(AsyncIO())
    dramatiq.set_broker(broker)
    poster = Poster(args.hook, args.concurrency)

    async def post(key: str) -> None:
        await poster.post(key)

    deliver: Any = dramatiq.actor(post, actor_name="deliver", max_retries=0)

    for _ in range(args.runs):
        deliver.send(uuid.uuid4().hex)
    quiet_logs()

    def work(stop: threading.Event) -> None:
        broker.emit_after("process_boot")  # starts the AsyncIO middleware's event loop thread
        worker = dramatiq.Worker(broker, worker_threads=args.concurrency, worker_timeout=100)
        worker.start()
        stop.wait()
        worker.stop()
        broker.emit_before("process_stop")
        broker.close()

    measured(work)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("system", choices=("taskiq", "dramatiq"))
    parser.add_argument("--hook", required=True)
    parser.add_argument("--redis", required=True)
    parser.add_argument("--prefix", required=True, help="the Redis keys of this run")
    parser.add_argument("--runs", type=int, required=True)
    parser.add_argument("--concurrency", type=int, default=64)
    args = parser.parse_args()
    (taskiq_main if args.system == "taskiq" else dramatiq_main)(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
