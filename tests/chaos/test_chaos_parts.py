"""The chaos suite's own parts, each proven on its own: the fault proxy (every mode, against a local
echo server, 200 connections at once, and real PostgreSQL), the witness sink (every behaviour, and
a real cronwheel HTTP attempt), and the command target with its parser."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp
import pytest
from chaos_backplane import Backplane, ProxyHandle
from chaos_proxy import HOST
from chaos_witness import (
    GRPC_METHOD,
    GRPC_PATH,
    Error,
    Hang,
    Ok,
    Slow,
    Throttle,
    Witness,
    append_argv,
    parse_command_line,
    read_command_lines,
)

from cronwheel.model import GrpcTarget, HttpTarget, Outcome
from cronwheel.worker.executors.base import AttemptContext, WorkerSettings
from cronwheel.worker.executors.grpc import GrpcExecutor
from cronwheel.worker.executors.http import HttpExecutor
from suite_backends import POSTGRES_ENV, suite_postgres_url

# -- fixtures -------------------------------------------------------------------------------------------


class EchoServer:
    """Echoes every byte back; ``quit`` as a whole chunk makes it close the connection."""

    def __init__(self) -> None:
        self.server: asyncio.Server | None = None
        self.port = 0
        self.ended = 0  # connections over (EOF, reset or quit)

    async def start(self) -> None:
        self.server = await asyncio.start_server(self._serve, HOST, 0, backlog=1024)
        self.port = self.server.sockets[0].getsockname()[1]

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while (data := await reader.read(65536)) and data != b"quit":
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        finally:
            self.ended += 1
            writer.close()


@pytest.fixture(scope="module")
def backplane() -> Iterator[Backplane]:
    with Backplane() as plane:
        yield plane


@pytest.fixture(scope="module")
def echo(backplane: Backplane) -> Iterator[EchoServer]:
    server = EchoServer()
    backplane.run(server.start())
    yield server
    backplane.run(server.close())


@pytest.fixture
def proxy(backplane: Backplane, echo: EchoServer, request: pytest.FixtureRequest) -> Iterator[ProxyHandle]:
    handle = backplane.proxy(request.node.name, HOST, echo.port)
    yield handle
    handle.close()


@pytest.fixture
def witness(backplane: Backplane) -> Iterator[Witness]:
    sink = backplane.witness()
    sink.reset_behaviours()
    sink.clear()
    yield sink
    sink.reset_behaviours()


# -- blocking socket helpers ----------------------------------------------------------------------------


def connect(handle: ProxyHandle, timeout: float = 2.0) -> socket.socket:
    return socket.create_connection(handle.address, timeout=timeout)


def receive(sock: socket.socket, size: int) -> bytes:
    data = bytearray()
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        if not chunk:
            raise AssertionError(f"EOF after {len(data)} of {size} bytes")
        data += chunk
    return bytes(data)


def round_trip(sock: socket.socket, data: bytes = b"ping") -> float:
    started = time.monotonic()
    sock.sendall(data)
    assert receive(sock, len(data)) == data
    return time.monotonic() - started


def assert_eof(sock: socket.socket, timeout: float = 2.0) -> None:
    """The peer closed the connection (FIN) within ``timeout``."""
    sock.settimeout(timeout)
    assert sock.recv(100) == b""


def assert_reset(sock: socket.socket, timeout: float = 2.0) -> None:
    """The peer reset the connection (RST) within ``timeout``."""
    sock.settimeout(timeout)
    with pytest.raises(ConnectionResetError):
        sock.recv(100)


def assert_reset_at_once(handle: ProxyHandle) -> None:
    """A new connection is reset at once: by the time connect() returns (under load the RST may
    beat it) or on the first read."""
    try:
        sock = connect(handle)
    except ConnectionResetError:
        return
    with sock:
        assert_reset(sock)


def assert_silent(sock: socket.socket, data: bytes, wait: float = 0.3) -> None:
    """The connection is open but nothing comes back: the read times out (no EOF, no RST)."""
    sock.sendall(data)
    sock.settimeout(wait)
    with pytest.raises(TimeoutError):
        sock.recv(100)


def wait_for(condition: Callable[[], bool], timeout: float = 2.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


# -- the proxy ------------------------------------------------------------------------------------------


def test_backplane_runs_coroutines_and_factories_and_times_out(backplane: Backplane) -> None:
    assert backplane.run(asyncio.sleep(0, "coroutine")) == "coroutine"
    assert backplane.run(lambda: asyncio.sleep(0, "factory")) == "factory"
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        backplane.run(asyncio.sleep(5), timeout=0.1)
    assert time.monotonic() - started < 1.0


def test_proxy_resets_clients_when_the_upstream_refuses(backplane: Backplane) -> None:
    with socket.socket() as unused:
        unused.bind((HOST, 0))
        port = unused.getsockname()[1]  # bound, not listening: connections are refused
        handle = backplane.proxy("refused", HOST, port)
        try:
            assert_reset_at_once(handle)
            assert handle.stats().resets == 1
        finally:
            handle.close()


def test_proxy_passes_bytes_both_ways_and_closes_each_side_with_the_other(
    proxy: ProxyHandle, echo: EchoServer
) -> None:
    payload = os.urandom(1 << 20)
    with connect(proxy) as sock:
        assert round_trip(sock, b"hello") < 0.5
        sender = threading.Thread(target=sock.sendall, args=(payload,))
        sender.start()
        assert receive(sock, len(payload)) == payload
        sender.join()
        ended = echo.ended
    wait_for(lambda: echo.ended == ended + 1)  # the client closed: so did the upstream side
    with connect(proxy) as sock:
        sock.sendall(b"quit")  # the upstream closes: so does the client side
        assert_eof(sock)
    stats = proxy.stats()
    assert stats.accepted == 2
    assert stats.bytes_up >= len(payload) + 9
    assert stats.bytes_down == len(payload) + 5
    assert stats.resets == 0


def test_delay_adds_the_latency_each_way_without_serialising_it_and_keeps_order(proxy: ProxyHandle) -> None:
    with connect(proxy) as sock:
        assert round_trip(sock) < 0.1
        proxy.delay(100)
        rtt = round_trip(sock)
        assert 0.199 <= rtt < 0.2 + 0.25  # 100 ms up, 100 ms down

        started = time.monotonic()
        messages = [f"{index:04d}\n".encode() for index in range(20)]
        for message in messages:  # 20 chunks, 10 ms apart: latency is not added up per chunk
            sock.sendall(message)
            time.sleep(0.01)
        assert receive(sock, 100) == b"".join(messages)
        assert 0.2 <= time.monotonic() - started < 1.0

        proxy.delay(20, jitter_ms=30)
        messages = [f"{index:04d}\n".encode() for index in range(100)]
        for message in messages:
            sock.sendall(message)
            time.sleep(0.001)
        assert receive(sock, 500) == b"".join(messages)  # jitter never reorders

        proxy.heal()
        assert round_trip(sock) < 0.1


def test_blackhole_silences_open_and_new_connections_until_heal(proxy: ProxyHandle) -> None:
    idle, busy = connect(proxy), connect(proxy)
    round_trip(idle)
    round_trip(busy)
    proxy.blackhole()
    before = proxy.stats()
    assert_silent(busy, b"lost")
    held = connect(proxy)  # accepted, never forwarded
    assert_silent(held, b"hello")
    quiet = connect(proxy)  # accepted during the partition, sends nothing during it
    during = proxy.stats()
    assert during.bytes_up == before.bytes_up
    assert during.dropped == before.dropped + 9

    proxy.heal()
    assert_reset(busy)  # lost bytes: reset (documented), the client reconnects
    assert_reset(held)
    round_trip(idle)  # idle during the partition: unharmed
    round_trip(quiet)  # connected upstream at heal
    with connect(proxy) as fresh:
        round_trip(fresh)
    assert proxy.stats().resets == 2
    for sock in (idle, busy, held, quiet):
        sock.close()


def test_cut_resets_open_connections_and_new_ones_until_heal(proxy: ProxyHandle, echo: EchoServer) -> None:
    with connect(proxy) as sock:
        round_trip(sock)
        ended = echo.ended
        proxy.cut()
        assert_reset(sock)
    wait_for(lambda: echo.ended == ended + 1)  # the upstream side is reset too
    for _ in range(3):
        assert_reset_at_once(proxy)
    proxy.heal()
    with connect(proxy) as sock:
        round_trip(sock)
    assert proxy.stats().resets == 4


async def test_proxy_copes_with_200_concurrent_connections(proxy: ProxyHandle) -> None:
    streams = await asyncio.gather(*(asyncio.open_connection(*proxy.address) for _ in range(200)))
    deadline = time.monotonic() + 5
    while proxy.stats().open < 200 and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    assert proxy.stats().open == 200

    async def talk(index: int, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
        writer.write(f"connection {index:03d};".encode() * 200)
        await writer.drain()
        answer = await reader.readexactly(len(f"connection {index:03d};") * 200)
        writer.close()
        return answer

    answers = await asyncio.wait_for(
        asyncio.gather(*(talk(index, *stream) for index, stream in enumerate(streams))), 10
    )
    assert answers == [f"connection {index:03d};".encode() * 200 for index in range(200)]
    assert proxy.stats().accepted == 200


async def test_proxy_in_front_of_postgresql_serves_queries_and_large_results(backplane: Backplane) -> None:
    import asyncpg

    admin_url = await suite_postgres_url()
    if admin_url is None:
        pytest.skip(f"{POSTGRES_ENV} is set empty: PostgreSQL opted out")
    url = urlsplit(admin_url)
    handle = backplane.proxy("postgres", url.hostname or HOST, url.port or 5432)
    try:
        connection = await asyncpg.connect(
            host=HOST, port=handle.port, user=url.username or "postgres", database=url.path.lstrip("/")
        )
        try:
            assert await connection.fetchval("select 1") == 1
            big = "select g, repeat('x', 1000) as filler from generate_series(1, 5000) as g"
            rows = await connection.fetch(big)
            assert [row["g"] for row in rows] == list(range(1, 5001))
            assert all(row["filler"] == "x" * 1000 for row in rows)
            assert handle.stats().bytes_down > 5_000_000

            handle.delay(50)  # latency, not a throughput cap: 5 MB still comes back at once
            started = time.monotonic()
            assert len(await connection.fetch(big)) == 5000
            assert 0.1 <= time.monotonic() - started < 2.0
        finally:
            handle.heal()
            await connection.close()
    finally:
        handle.close()


# -- the witness ----------------------------------------------------------------------------------------


async def test_witness_records_a_real_cronwheel_attempt(witness: Witness) -> None:
    executor = HttpExecutor(WorkerSettings(allowed_networks=("127.0.0.0/8",)))
    slot = datetime(2025, 3, 30, 1, 0, 30, tzinfo=UTC)
    ctx = AttemptContext(
        execution_id=str(uuid.uuid4()), job_id="job-7", job_name="n", team="t",
        scheduled_at=slot, attempt=3, timeout_s=5,
    )  # fmt: skip
    before = time.time()
    try:
        result = await executor.execute(HttpTarget(f"{witness.url}/hooks/a"), ctx)
    finally:
        await executor.close()
    assert result.outcome is Outcome.SUCCESS, result.error
    [delivery] = witness.deliveries()
    assert (delivery.execution_id, delivery.job_id, delivery.slot, delivery.attempt, delivery.path) == (
        ctx.execution_id, "job-7", slot, 3, "/hooks/a",
    )  # fmt: skip
    assert delivery.slot.tzinfo is UTC
    assert before <= delivery.arrived <= time.time()
    assert delivery.answered == 200
    assert witness.count() == witness.count("/hooks") == 1
    assert witness.count("/other") == 0


async def test_the_grpc_witness_records_real_cronwheel_attempts_as_the_http_one_does(
    witness: Witness,
) -> None:
    """The chaos workload's gRPC jobs: the same records (ids from the metadata), under GRPC_PATH,
    answered by its behaviour: Error is a retryable INTERNAL, Throttle a RESOURCE_EXHAUSTED."""
    executor = GrpcExecutor(WorkerSettings(allowed_networks=("127.0.0.0/8",)))
    slot = datetime(2025, 3, 30, 1, 0, 30, tzinfo=UTC)
    ctx = AttemptContext(
        execution_id=str(uuid.uuid4()), job_id="job-8", job_name="n", team="t",
        scheduled_at=slot, attempt=2, timeout_s=5, payload={"group": "grpc", "index": 3},
    )  # fmt: skip
    target = GrpcTarget(witness.grpc_address, GRPC_METHOD)
    before = time.time()
    try:
        ok = await executor.execute(target, ctx)  # the method found through the witness's reflection
        witness.behave(GRPC_PATH, Error(500))
        failed = await executor.execute(target, ctx)
        witness.behave(GRPC_PATH, Throttle(1))
        throttled = await executor.execute(target, ctx)
    finally:
        await executor.close()
    assert ok.outcome is Outcome.SUCCESS, ok.error
    assert (failed.outcome, failed.final, failed.error) == (
        Outcome.FAILURE,
        False,
        "grpc status INTERNAL: error 500",
    )
    assert (throttled.outcome, throttled.final) == (Outcome.FAILURE, False)
    deliveries = witness.deliveries()
    assert [(d.path, d.answered) for d in deliveries] == [
        (GRPC_PATH, 200),
        (GRPC_PATH, 500),
        (GRPC_PATH, 429),
    ]
    first = deliveries[0]
    assert (first.execution_id, first.job_id, first.slot, first.attempt) == (
        ctx.execution_id,
        "job-8",
        slot,
        2,
    )
    assert before <= first.arrived <= time.time()
    assert witness.count(GRPC_PATH) == 3


async def test_witness_answers_each_behaviour_by_longest_prefix(witness: Witness) -> None:
    witness.behave("/", Error(503))  # the default for every path
    witness.behave("/ok", Ok())
    witness.behave("/throttle", Throttle(6.2))
    witness.behave("/slow", Slow(0.3))
    witness.behave("/slow/error", Error())
    headers = {"Idempotency-Key": "e1", "X-Cronwheel-Job-Id": "j1",
               "X-Cronwheel-Scheduled-At": "2025-01-01T00:00:00.5Z", "X-Cronwheel-Attempt": "2"}  # fmt: skip
    async with aiohttp.ClientSession(witness.url, headers=headers) as session:
        async with session.post("/ok/x") as response:
            assert response.status == 200
        async with session.get("/elsewhere") as response:
            assert response.status == 503
        async with session.post("/throttle") as response:
            assert (response.status, response.headers["Retry-After"]) == (429, "7")
        async with session.post("/slow/error") as response:
            assert response.status == 500
        started = time.monotonic()
        async with session.post("/slow") as response:
            assert response.status == 200
        assert 0.3 <= time.monotonic() - started < 1.0
        witness.reset_behaviours()
        async with session.post("/elsewhere") as response:
            assert response.status == 200
    answered = [(d.path, d.answered) for d in witness.deliveries()]
    assert answered == [("/ok/x", 200), ("/elsewhere", 503), ("/throttle", 429), ("/slow/error", 500),
                        ("/slow", 200), ("/elsewhere", 200)]  # fmt: skip
    first = witness.deliveries()[0]
    assert (first.execution_id, first.job_id, first.attempt) == ("e1", "j1", 2)
    assert first.slot == datetime(2025, 1, 1, 0, 0, 0, 500000, tzinfo=UTC)


async def test_witness_hang_never_answers_and_blocks_nothing_else(witness: Witness) -> None:
    witness.behave("/hang", Hang())
    async with aiohttp.ClientSession(witness.url) as session:

        async def hang() -> None:
            async with session.post("/hang", timeout=aiohttp.ClientTimeout(total=1.0)):
                raise AssertionError("a hanging witness answered")

        hanging = asyncio.create_task(hang())
        while witness.count("/hang") == 0:
            await asyncio.sleep(0.01)
        async with session.post("/other") as response:
            assert response.status == 200
        assert not hanging.done()  # answered while the hanging request still waits
        with pytest.raises(TimeoutError):
            await hanging
    assert [(d.path, d.answered) for d in witness.deliveries()] == [("/hang", None), ("/other", 200)]
    assert witness.deliveries()[0].execution_id == ""  # recorded although it carried no cronwheel headers


async def test_witness_records_a_thousand_concurrent_requests(witness: Witness) -> None:
    async with aiohttp.ClientSession(witness.url) as session:

        async def post(index: int) -> int:
            async with session.post(f"/load/{index}", headers={"Idempotency-Key": str(index)}) as response:
                return response.status

        semaphore = asyncio.Semaphore(50)

        async def limited(index: int) -> int:
            async with semaphore:
                return await post(index)

        statuses = await asyncio.gather(*(limited(index) for index in range(1000)))
    assert set(statuses) == {200}
    deliveries = witness.deliveries()
    assert sorted(int(d.execution_id) for d in deliveries) == list(range(1000))
    assert all(d.answered == 200 for d in deliveries)


# -- the command target -----------------------------------------------------------------------------------


def identity(execution_id: str = "run-1", attempt: int = 1) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "CRONWHEEL_EXECUTION_ID": execution_id,
        "CRONWHEEL_JOB_ID": "job-1",
        "CRONWHEEL_SCHEDULED_AT": "2025-03-30T01:00:00Z",
        "CRONWHEEL_ATTEMPT": str(attempt),
    }


def test_chaos_append_writes_start_and_done_lines_the_parser_reads(tmp_path: Path) -> None:
    lines_file = tmp_path / "runs.log"
    assert read_command_lines(lines_file) == []
    before = time.time()
    process = subprocess.run(
        append_argv(lines_file, sleep_s=0.1), env=identity(attempt=2), check=True, timeout=10
    )
    start, done = read_command_lines(lines_file)
    assert process.returncode == 0
    assert (start.kind, done.kind) == ("start", "done")
    for line in (start, done):
        assert (line.execution_id, line.job_id, line.attempt) == ("run-1", "job-1", 2)
        assert line.slot == datetime(2025, 3, 30, 1, 0, tzinfo=UTC)
        assert line.child_pid is None
    assert start.pid == done.pid
    assert before < start.at <= done.at - 0.1 < time.time()


def test_chaos_append_spawns_a_grandchild_in_its_process_group(tmp_path: Path) -> None:
    lines_file = tmp_path / "runs.log"
    process = subprocess.Popen(append_argv(lines_file, spawn_child=True), env=identity(),
                               stdout=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        assert process.wait(10) == 0
        start, done = read_command_lines(lines_file)
        assert start.pid == process.pid
        assert start.child_pid is not None
        assert done.child_pid == start.child_pid
        assert os.getpgid(start.child_pid) == process.pid  # same group: outlives the script
    finally:
        os.killpg(process.pid, signal.SIGKILL)


def test_chaos_append_lines_stay_whole_under_concurrent_appends(tmp_path: Path) -> None:
    lines_file = tmp_path / "runs.log"
    processes = [
        subprocess.Popen(append_argv(lines_file), env=identity(f"run-{index}", attempt=index))
        for index in range(8)
    ]
    assert [process.wait(20) for process in processes] == [0] * 8
    lines = read_command_lines(lines_file)
    assert sorted((line.execution_id, line.kind) for line in lines) == sorted(
        (f"run-{index}", kind) for index in range(8) for kind in ("start", "done")
    )
    assert all(line.attempt == int(line.execution_id.split("-")[1]) for line in lines)


def test_chaos_append_refuses_to_run_without_the_identity_and_the_parser_rejects_garbage(
    tmp_path: Path,
) -> None:
    lines_file = tmp_path / "runs.log"
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin")}
    process = subprocess.run(append_argv(lines_file), env=env, capture_output=True, check=False, timeout=10)
    assert process.returncode == 2
    assert b"CRONWHEEL_EXECUTION_ID" in process.stderr
    assert not lines_file.exists()
    with pytest.raises(ValueError, match="not a chaos_append line"):
        parse_command_line("start run-1 job-1")
    with pytest.raises(ValueError, match="offset"):
        parse_command_line("done run-1 job-1 2025-03-30T01:00:00 1 1.5 42")
    lines_file.write_text("start run-1 job-1 2025-03-30T01:00:00Z 1 1.5 42 43\nbroken\n")
    with pytest.raises(ValueError, match=":2:"):
        read_command_lines(lines_file)
