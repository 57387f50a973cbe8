"""Test harness: the real server in a subprocess, a local HTTP sink, and helpers to talk to both.

Everything stays on 127.0.0.1. These tests run the product as a user would: `cronwheel server`
over a temporary SQLite file, jobs created over the REST API or the CLI, deliveries observed at
the sink, run records read back over the API with the admin token the server wrote beside its
database (``cronwheel.db.token``).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from aiohttp import web

URL_LINE = re.compile(r"cronwheel serving on (http://\S+)")


@dataclass
class Delivery:
    path: str
    headers: dict[str, str]
    body: Any
    at: float  # time.time() of arrival


@dataclass
class Sink:
    """Records every request; ``behaviour`` decides each answer by path."""

    url: str = ""
    deliveries: list[Delivery] = field(default_factory=list)
    # path -> list of (status, delay_s) answers consumed in order; the last one repeats
    script: dict[str, list[tuple[int, float]]] = field(default_factory=dict)
    _served: dict[str, int] = field(default_factory=dict)

    def at(self, path: str) -> list[Delivery]:
        return [d for d in self.deliveries if d.path == path]

    def answer(self, path: str, *answers: tuple[int, float]) -> str:
        self.script[path] = list(answers)
        return f"{self.url}{path}"

    async def handle(self, request: web.Request) -> web.Response:
        raw = await request.read()
        body = json.loads(raw) if raw else None
        self.deliveries.append(Delivery(request.path, dict(request.headers), body, time.time()))
        answers = self.script.get(request.path, [(200, 0.0)])
        index = self._served.get(request.path, 0)
        self._served[request.path] = index + 1
        status, delay = answers[min(index, len(answers) - 1)]
        if delay:
            await asyncio.sleep(delay)
        return web.Response(status=status, text=f"answer {status}")


@pytest.fixture
async def sink() -> AsyncIterator[Sink]:
    recorder = Sink()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", recorder.handle)
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    recorder.url = f"http://127.0.0.1:{port}"
    yield recorder
    await runner.cleanup()


@dataclass
class ServerProcess:
    db: Path
    args: tuple[str, ...]
    log: Path
    process: subprocess.Popen[bytes] | None = None
    url: str = ""

    def start(self, timeout: float = 20.0, env: dict[str, str] | None = None) -> str:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("a") as marker:  # the URL looked for is the one this start prints
            marker.write("\n=== start ===\n")
        env = {**(env or os.environ), "PYTHONUNBUFFERED": "1"}
        port = [] if "--port" in self.args else ["--port", "0"]
        command = [
            sys.executable,
            "-m",
            "cronwheel",
            "server",
            *port,
            "--database-url",
            f"sqlite:///{self.db}",
        ]
        with self.log.open("ab") as handle:  # the process writes to its own copy of the descriptor
            self.process = subprocess.Popen([*command, *self.args], stdout=handle, stderr=handle, env=env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            match = URL_LINE.search(self.log.read_text(errors="replace").split("=== start ===")[-1])
            if match:
                self.url = match.group(1)
                return self.url
            if self.process.poll() is not None:
                raise AssertionError(f"server exited with {self.process.returncode}:\n{self.log.read_text()}")
            time.sleep(0.05)
        raise AssertionError(f"server did not start:\n{self.log.read_text()}")

    @property
    def token_file(self) -> Path:
        return Path(f"{self.db}.token")

    @property
    def headers(self) -> dict[str, str]:
        """The Authorization header of the server's own admin token."""
        return {"Authorization": f"Bearer {self.token_file.read_text().strip()}"}

    def client(self, **options: Any) -> httpx.AsyncClient:
        """An API client authenticated with the server's admin token."""
        return httpx.AsyncClient(base_url=self.url, headers=self.headers, timeout=10, **options)

    def kill9(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> int:
        """End the process (SIGTERM, then SIGKILL after 20 s): its exit status, 0 for a server
        never started; safe to call again, and on one whose start failed or timed out."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGTERM)
        try:
            return self.process.wait(20)
        except subprocess.TimeoutExpired:
            self.process.kill()
            return self.process.wait(10)

    def restart(self) -> str:
        self.kill9()
        return self.start()


@pytest.fixture
def server_factory(tmp_path: Path) -> Iterator[Callable[..., ServerProcess]]:
    made: list[ServerProcess] = []

    def make(*args: str) -> ServerProcess:
        server = ServerProcess(
            tmp_path / "cronwheel.db", ("--allow-network", "127.0.0.0/8", *args), tmp_path / "server.log"
        )
        made.append(server)  # before start: a server whose start fails or times out is stopped too
        server.start()
        return server

    yield make
    for server in made:
        server.stop()


@pytest.fixture
def server(server_factory: Callable[..., ServerProcess]) -> ServerProcess:
    return server_factory()


@pytest.fixture
async def api(server: ServerProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with server.client() as client:
        yield client


async def wait_for(condition: Callable[[], Any], timeout: float = 10.0, every: float = 0.05) -> Any:
    """Poll ``condition`` (sync or async) until it returns something truthy."""
    deadline = time.monotonic() + timeout
    while True:
        value = condition()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {condition}")
        await asyncio.sleep(every)
