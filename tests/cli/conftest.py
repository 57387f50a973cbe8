"""A real uvicorn server on 127.0.0.1 (a free port) in a background thread, serving the API over
a real SqlStore on a tmp SQLite file; the CLI is run against it with click's CliRunner, with an
admin token of every team (``--token``) and a config file and state directory of the test's own."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import uvicorn
from click.testing import CliRunner, Result

import suite_workers
from api.doubles import RecordingQueue
from cronwheel.api.app import ApiServices, create_app, store_readiness
from cronwheel.auth.identity import Scope
from cronwheel.auth.tokens import issue
from cronwheel.cli import cli
from cronwheel.clock import ManualClock
from cronwheel.jobs.service import ChangeFeed, JobService, TargetPolicy
from cronwheel.node.server import ServerSettings, http_config
from cronwheel.secrets.crypto import Keyring, new_key
from cronwheel.secrets.service import SecretService
from cronwheel.store.sql import SqlStore, open_store
from suite_stores import fresh_sqlite_database

START = datetime(2026, 3, 2, 12, 0, 0, tzinfo=UTC)
SECRET_KEYS = Keyring([new_key("k1")])  # the test server's keys for team secrets


@dataclass
class Server:
    url: str
    clock: ManualClock
    queue: RecordingQueue
    store: SqlStore
    token: str  # an admin token of every team
    home: Path  # where the CLI's config file and state directory are

    def environment(self, extra: dict[str, str] | None = None) -> dict[str, str | None]:
        """The CLI's environment: its own config and state, none of the caller's settings."""
        isolated: dict[str, str | None] = {
            "CRONWHEEL_CONFIG": str(self.home / "config.yaml"),
            "XDG_STATE_HOME": str(self.home / "state"),
            "CRONWHEEL_URL": None,
            "CRONWHEEL_TOKEN": None,
            "CRONWHEEL_CONTEXT": None,
            "CRONWHEEL_DATABASE_URL": None,
        }
        return {**isolated, **(extra or {})}

    def run(
        self, *args: str, input: str | None = None, env: dict[str, str] | None = None, token: bool = True
    ) -> Result:
        """``cronwheel ARGS --url <this server> --token <admin token>`` (no token: ``token=False``)."""
        auth = ["--token", self.token] if token else []
        return CliRunner().invoke(
            cli, [*args, "--url", self.url, *auth], input=input, env=self.environment(env)
        )

    def bare(self, *args: str, input: str | None = None, env: dict[str, str] | None = None) -> Result:
        """``cronwheel ARGS`` as typed: the URL and token come from the environment, config or files."""
        return CliRunner().invoke(cli, list(args), input=input, env=self.environment(env))

    def json(self, *args: str) -> Any:
        result = self.run(*args, "-o", "json")
        assert result.exit_code == 0, result.output + result.stderr
        return json.loads(result.stdout)


class _Thread(threading.Thread):
    def __init__(
        self,
        database: Path,
        clock: ManualClock,
        queue: RecordingQueue,
        sock: socket.socket,
        policy: TargetPolicy,
    ) -> None:
        super().__init__(daemon=True, name="cronwheel-test-api")
        self.database, self.clock, self.queue, self.sock = database, clock, queue, sock
        self.policy = policy
        self.ready = threading.Event()
        self.server: uvicorn.Server | None = None
        self.store: SqlStore | None = None
        self.token = ""
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as error:
            self.error = error
            self.ready.set()

    async def _serve(self) -> None:
        self.store = await open_store(f"sqlite:///{self.database}", clock=self.clock)
        record, self.token = issue("cli-tests", None, [Scope.ADMIN], START)
        await self.store.create_token(record)
        service = JobService(self.store, self.queue, ChangeFeed(), self.clock, self.policy)
        secrets = SecretService(self.store, SECRET_KEYS, self.clock)
        app = create_app(
            ApiServices(self.store, service, self.clock, store_readiness(self.store), secrets=secrets)
        )
        config = http_config(app, ServerSettings(), lifespan="off")  # as `cronwheel server` serves
        self.server = uvicorn.Server(config)
        serving = asyncio.create_task(self.server.serve(sockets=[self.sock]))
        while not self.server.started and not serving.done():
            await asyncio.sleep(0.005)
        self.ready.set()
        try:
            await serving
        finally:
            await self.store.close()


# plain credentials allowed: the CLI's tests write jobs that hold them (what `secrets adopt`
# moves, what tables and plans hide); the API's tests cover their refusal
POLICY = TargetPolicy(python_allow=("myapp.*",), allow_plain_credentials=True)


@pytest.fixture
def server(tmp_path: Path, store_templates: Path) -> Iterator[Server]:
    with serve(tmp_path, store_templates, POLICY) as running:
        yield running


@contextmanager
def serve(tmp_path: Path, store_templates: Path, policy: TargetPolicy) -> Iterator[Server]:
    """A server of its own under ``tmp_path`` (several may run at once, each in its directory)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    # a copy of the worker's migrated database (tests/conftest.py), which the server opens
    fresh_sqlite_database(store_templates, tmp_path / "cronwheel.db")
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    clock, queue = ManualClock(START), RecordingQueue()
    thread = _Thread(tmp_path / "cronwheel.db", clock, queue, sock, policy)
    thread.start()
    assert thread.ready.wait(10), "the API server did not start"
    if thread.error is not None:
        raise thread.error
    assert thread.store is not None
    try:
        yield Server(f"http://127.0.0.1:{port}", clock, queue, thread.store, thread.token, tmp_path / "home")
    finally:
        assert thread.server is not None
        thread.server.should_exit = True
        thread.join(10)
        sock.close()


def free_port() -> int:
    """A loopback port nothing listens on, of this xdist worker's own (``suite_workers``)."""
    return suite_workers.free_port()


@pytest.fixture
def settings_of(monkeypatch: pytest.MonkeyPatch) -> Callable[[Any, list[str], dict[str, str]], Any]:
    """The settings a node command (``server``, ``api``, ``scheduler``...) hands to
    ``cronwheel.node.server.serve`` for ``args`` and ``env``, without serving."""
    seen: list[Any] = []

    async def serve(settings: Any, announce: Any) -> None:
        seen.append(settings)

    monkeypatch.setattr("cronwheel.node.server.serve", serve)

    def invoke(command: Any, args: list[str], env: dict[str, str]) -> Any:
        result = CliRunner().invoke(command, args, env=env)
        assert result.exit_code == 0, result.output
        return seen.pop()

    return invoke
