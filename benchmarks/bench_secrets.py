"""What team secrets and signatures cost an HTTP attempt (a benchmark, not a test).

Method. One process: a local HTTP sink (aiohttp, 127.0.0.1) answering ``200 ok``, a SqlStore over a
temp SQLite file, and the real :class:`~cronwheel.worker.executors.http.HttpExecutor` sending
``--attempts`` POSTs, ``--concurrency`` at a time, for each variant:

* ``plain``: no resolver (as before secrets existed);
* ``resolver``: the worker's resolver over the store, the team holding no secret: each attempt
  looks up the team's default signing secret (a cache hit but for the first);
* ``secret``: an ``Authorization`` header that refers to a secret, resolved and opened per attempt;
* ``signed``: the same, plus a ``signing_secret``: every request carries ``webhook-signature``.

Also, without HTTP, the CPU microseconds of each step on its own: opening a sealed value, one
signature over a 1 KiB body, redacting 1 KiB of output. The variants run in turn, ``--rounds``
times, and the best round of each is printed (a shared machine's noise only ever slows a round
down): attempts/s, and the process's CPU microseconds per attempt, the sink's included (the
steadier figure where other work shares the cores: the wall rate follows the machine's load).

    .venv/bin/python benchmarks/bench_secrets.py --attempts 5000 --rounds 5
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import timeit
from datetime import UTC, datetime
from pathlib import Path

from aiohttp import web

from cronwheel.model import HttpTarget, SecretRef
from cronwheel.secrets.crypto import Keyring, Sealed, new_key, seal, unseal
from cronwheel.secrets.resolve import Resolved, SecretResolver
from cronwheel.secrets.signing import new_signing_secret, signature_header, signing_keys
from cronwheel.store.port import StoredSecret
from cronwheel.store.sql import SqlStore, open_store
from cronwheel.worker.executors import AttemptContext, WorkerSettings
from cronwheel.worker.executors.http import HttpExecutor

KEYS = Keyring([new_key("k1")])
TOKEN = "sk_live_" + "x" * 40


async def sink() -> tuple[web.AppRunner, str]:
    async def ok(request: web.Request) -> web.Response:
        await request.read()
        return web.Response(text="ok")

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", ok)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    return runner, f"http://127.0.0.1:{runner.addresses[0][1]}/hook"


async def measure(
    store: SqlStore, target: HttpTarget, resolver: bool, attempts: int, concurrency: int
) -> tuple[float, float]:
    """Attempts per second, and CPU microseconds per attempt."""
    secrets = SecretResolver(store, KEYS) if resolver else None
    executor = HttpExecutor(WorkerSettings(allowed_networks=("127.0.0.0/8",)), secrets=secrets)
    ctx = AttemptContext("run-1", "job-1", "job", "billing", datetime.now(UTC), 1, 10.0, {"n": 1})
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            result = await executor.execute(target, ctx)
            assert result.status_code == 200, result

    await asyncio.gather(*(one() for _ in range(50)))  # warm: connections, cache
    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(one() for _ in range(attempts)))
    elapsed, used = time.perf_counter() - started, time.process_time() - cpu
    await executor.close()
    return attempts / elapsed, used / attempts * 1e6


def micro() -> dict[str, float]:
    sealed = seal(KEYS, "billing", "api-key", TOKEN)
    keys = signing_keys(new_signing_secret(), "s")
    body = b"x" * 1024
    output = "y" * 1000 + TOKEN[:10]
    resolved = Resolved({"api-key": TOKEN})
    steps = {
        "unseal": lambda: unseal(KEYS, "billing", "api-key", Sealed(sealed.key_id, sealed.value)),
        "sign 1 KiB": lambda: signature_header(keys, "run-1", 1_700_000_000, body),
        "redact 1 KiB": lambda: resolved.redact(output),
    }
    return {
        name: min(timeit.repeat(step, number=2000, repeat=5)) / 2000 * 1e6 for name, step in steps.items()
    }


async def run(attempts: int, concurrency: int, rounds: int) -> None:
    runner, url = await sink()
    with tempfile.TemporaryDirectory() as directory:
        store = await open_store(f"sqlite:///{Path(directory) / 'bench.db'}")
        for name, value in (("api-key", TOKEN), ("hook-signing", new_signing_secret())):
            sealed = seal(KEYS, "billing", name, value)
            await store.put_secret(StoredSecret("billing", name, sealed.key_id, sealed.value))
        header = (("Authorization", SecretRef("api-key")),)
        variants = {
            "plain": (HttpTarget(url, headers=(("Authorization", TOKEN),)), False),
            "resolver": (HttpTarget(url, headers=(("Authorization", TOKEN),)), True),
            "secret": (HttpTarget(url, headers=header), True),
            "signed": (HttpTarget(url, headers=header, signing_secret=SecretRef("hook-signing")), True),
        }
        print(f"{attempts} attempts, {concurrency} at a time, sink in this process, best of {rounds} rounds")
        best = {name: (0.0, float("inf")) for name in variants}
        for _ in range(rounds):
            for name, (target, resolver) in variants.items():
                rate, cpu = await measure(store, target, resolver, attempts, concurrency)
                best[name] = (max(best[name][0], rate), min(best[name][1], cpu))
        for name, (rate, cpu) in best.items():
            print(f"  {name:<9} {rate:8.0f} attempts/s {cpu:6.0f} us CPU/attempt")
        await store.close()
    await runner.cleanup()
    for name, micros in micro().items():
        print(f"  {name:<13} {micros:6.1f} us")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--attempts", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    asyncio.run(run(args.attempts, args.concurrency, args.rounds))


if __name__ == "__main__":
    main()
