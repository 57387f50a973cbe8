"""The API as the fuzzer meets it: the real application over real HTTP on 127.0.0.1 (uvicorn, in
a thread of the test process), on a real store (a SQLite file, or a PostgreSQL database) and the
system clock, as ``cronwheel server`` and the ``api`` role build it, but with the API alone.

No scheduler and no worker run: nothing the fuzzer writes is ever fired or attempted, so no URL it
invents is ever called and no command it invents is ever run (test traffic stays on loopback).
That is also why the policy may allow command targets here: accepting them exercises their
validation, and nothing can run them.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import uvicorn

from cronwheel.api.app import ApiServices, create_app, store_readiness
from cronwheel.auth.identity import Scope
from cronwheel.auth.tokens import issue
from cronwheel.clock import SystemClock
from cronwheel.jobs.service import ChangeFeed, JobService, TargetPolicy
from cronwheel.node.server import bind
from cronwheel.queue.memory import MemoryQueue
from cronwheel.secrets.crypto import Keyring, new_key
from cronwheel.secrets.service import SecretService
from cronwheel.store.sql import SqlStore, open_store

POLICY = TargetPolicy(allow_commands=True)


@dataclass(frozen=True, slots=True)
class Served:
    """Where the API listens, and the bearer token of an admin of every team (None while the API
    has no authentication)."""

    url: str
    token: str | None


async def admin_token(store: SqlStore) -> str | None:
    """The token the fuzzer sends: an admin of every team, stored in ``store``."""
    record, text = issue("fuzzer", None, (Scope.ADMIN,), SystemClock().now())
    await store.create_token(record)
    return text


@contextlib.contextmanager
def serve_api(database: Path | str, *, startup_timeout_s: float = 30.0) -> Iterator[Served]:
    """Serve the API on a free port of 127.0.0.1 over ``database`` (a new SQLite file's path, or
    a store URL); stopped (and the thread joined) on exit."""
    url = database if isinstance(database, str) else f"sqlite:///{database}"
    started = threading.Event()
    found: list[Served | BaseException] = []
    server: list[uvicorn.Server] = []

    async def main() -> None:
        try:
            clock = SystemClock()
            store = await open_store(url, clock=clock)
        except BaseException as error:
            found.append(error)
            started.set()
            raise
        try:
            feed = ChangeFeed()
            service = JobService(store, MemoryQueue(clock), feed, clock, POLICY)
            secrets = SecretService(store, Keyring([new_key("fuzz")]), clock)
            services = ApiServices(
                store, service, clock, store_readiness(store), secrets=secrets, changes=feed
            )
            # an event stream answers its opening and ends: each case is whole at once (a server
            # of --url keeps its streams open, and schemathesis.toml's request-timeout ends them)
            services.events.lifetime_s = 0.0
            app = create_app(services)
            listening = bind("127.0.0.1", 0)
            port = listening.getsockname()[1]
            config = uvicorn.Config(app, log_config=None, access_log=False, lifespan="off")
            server.append(uvicorn.Server(config))
            found.append(Served(f"http://127.0.0.1:{port}", await admin_token(store)))
            serving = asyncio.create_task(server[0].serve(sockets=[listening]))
            while not server[0].started and not serving.done():
                await asyncio.sleep(0.01)
            started.set()
            await serving
        finally:
            started.set()
            await store.close()

    thread = threading.Thread(target=asyncio.run, args=(main(),), name="fuzzed-api", daemon=True)
    thread.start()
    try:
        started.wait(startup_timeout_s)
        if not (server and server[0].started and found and isinstance(found[0], Served)):
            raise RuntimeError(f"the API did not start: {found[0] if found else 'timed out'}")
        yield found[0]
    finally:
        if server:
            server[0].should_exit = True
        thread.join(startup_timeout_s)
