"""What the chaos suite's targets witnessed.

* :class:`Witness`: the HTTP sink cronwheel's webhooks hit. It records every request, to any path,
  as a :class:`Delivery` the moment it arrives, then answers as the behaviour set for the path's
  longest matching prefix tells (default :class:`Ok`).
* the gRPC witness beside it (same process, same loop, same records and behaviours): the unary
  method :data:`GRPC_METHOD` (request ``google.protobuf.Struct``: any JSON object payload; reply
  ``google.protobuf.Empty``), with server reflection, at ``Witness.grpc_address``. Its calls are
  recorded under the path :data:`GRPC_PATH`, whose behaviour answers them (``Ok``: OK; ``Error``:
  INTERNAL; ``Throttle``: RESOURCE_EXHAUSTED; ``Slow``, ``Hang`` as for HTTP), ``answered`` being
  the HTTP status the behaviour stands for. The ids come from the metadata
  ``cronwheel.worker.executors.grpc`` sends (``idempotency-key``, ``x-cronwheel-job-id``,
  ``x-cronwheel-scheduled-at``, ``x-cronwheel-attempt``).
* :func:`read_command_lines`: the lines ``chaos_append.py`` (the command target) appends, parsed.

Headers read (those ``cronwheel.worker.executors.http`` sends on every attempt): the execution id
from ``Idempotency-Key`` (cronwheel also sends it, identical, as the Standard Webhooks
``webhook-id``), ``X-Cronwheel-Job-Id``, ``X-Cronwheel-Scheduled-At`` (RFC 3339, ``Z``) and
``X-Cronwheel-Attempt``. A request lacking them is recorded all the same, with ``""`` ids,
attempt 0 and slot :data:`NO_SLOT`.
"""

from __future__ import annotations

import asyncio
import math
import signal
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import grpc
import grpc.aio
import httpx
from aiohttp import web
from google.protobuf import descriptor_pb2, descriptor_pool, empty_pb2, message_factory, struct_pb2
from grpc_reflection.v1alpha import reflection

HOST = "127.0.0.1"
EXECUTION_ID_HEADER = "Idempotency-Key"
WEBHOOK_ID_HEADER = "webhook-id"  # the same value as Idempotency-Key
JOB_ID_HEADER = "X-Cronwheel-Job-Id"
SCHEDULED_AT_HEADER = "X-Cronwheel-Scheduled-At"
ATTEMPT_HEADER = "X-Cronwheel-Attempt"
NO_SLOT = datetime(1970, 1, 1, tzinfo=UTC)  # a request without a readable slot header
APPEND_SCRIPT = Path(__file__).with_name("chaos_append.py")
GRPC_SERVICE = "cwchaos.Witness"
GRPC_METHOD = f"{GRPC_SERVICE}/Deliver"
GRPC_PATH = "/grpc"  # what gRPC deliveries are recorded (and their behaviour looked up) under


# -- the HTTP witness --------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Delivery:
    """One request as the witness received it; ``answered`` is the status it sent back, None while
    it has not answered (``Hang``, a ``Slow`` not over yet, or a client that gave up first)."""

    execution_id: str
    job_id: str
    slot: datetime  # aware UTC
    attempt: int
    arrived: float  # time.time() when the handler started
    path: str
    answered: int | None = None


@dataclass(frozen=True, slots=True)
class Ok:
    """Answer 200 at once."""


@dataclass(frozen=True, slots=True)
class Slow:
    """Answer ``status`` after ``seconds`` (nothing if the client gives up first)."""

    seconds: float
    status: int = 200


@dataclass(frozen=True, slots=True)
class Error:
    """Answer ``status`` (a failure) at once."""

    status: int = 500


@dataclass(frozen=True, slots=True)
class Throttle:
    """Answer 429 with ``Retry-After`` at once: ``retry_after_s`` rounded up to whole seconds
    (the header's delta-seconds form is an integer; cronwheel reads no other number)."""

    retry_after_s: float


@dataclass(frozen=True, slots=True)
class Hang:
    """Never answer: the request stays open until the client gives up (other requests go on)."""


Behaviour = Ok | Slow | Error | Throttle | Hang


def parse_slot(text: str | None) -> datetime:
    """An RFC 3339 instant as an aware UTC datetime; :data:`NO_SLOT` when absent or unreadable."""
    if not text:
        return NO_SLOT
    try:
        instant = datetime.fromisoformat(text)
    except ValueError:
        return NO_SLOT
    return NO_SLOT if instant.tzinfo is None else instant.astimezone(UTC)


def _parse_int(text: str | None) -> int:
    try:
        return int(text or "0")
    except ValueError:
        return 0


class Witness:
    """The webhook sink on 127.0.0.1:<free port>; thread-safe except :meth:`start` and
    :meth:`close`, which run on the backplane's loop.

    Recording is cheap (a few header reads and one list append under a lock) and happens before
    the behaviour applies, so ``arrived`` is when the request came in whatever the answer.
    Behaviours are looked up per request by longest path prefix; ``behave("/", b)`` sets the
    default for every path.
    """

    def __init__(self) -> None:
        self.url = ""
        self._lock = threading.Lock()
        self._records: list[Delivery] = []
        self._rules: tuple[tuple[str, Behaviour], ...] = ()  # longest prefix first
        self._runner: web.AppRunner | None = None
        self.grpc_address = ""  # 127.0.0.1:<port> of the gRPC witness
        self._grpc: grpc.aio.Server | None = None

    async def start(self, extra_routes: list[web.RouteDef] | None = None) -> None:
        app = web.Application()
        app.add_routes(extra_routes or [])  # matched first: control paths are never recorded
        app.router.add_route("*", "/{tail:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.5, handler_cancellation=True)
        await runner.setup()
        await web.TCPSite(runner, HOST, 0, backlog=1024).start()
        self._runner = runner
        self.url = f"http://{HOST}:{runner.addresses[0][1]}"
        self._grpc, port = await _start_grpc(self._deliver)
        self.grpc_address = f"{HOST}:{port}"

    async def close(self) -> None:
        if self._grpc is not None:
            await self._grpc.stop(0.5)
            self._grpc = None
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    def behave(self, prefix: str, behaviour: Behaviour) -> None:
        """Answer requests whose path starts with ``prefix`` (longest match wins) with ``behaviour``."""
        if not prefix.startswith("/"):
            raise ValueError(f"a path prefix starts with '/': {prefix!r}")
        with self._lock:
            rules = dict(self._rules)
            rules[prefix] = behaviour
            self._rules = tuple(sorted(rules.items(), key=lambda rule: len(rule[0]), reverse=True))

    def reset_behaviours(self) -> None:
        """Every path answered ``Ok()`` again."""
        with self._lock:
            self._rules = ()

    def behaviour_for(self, path: str) -> Behaviour:
        for prefix, behaviour in self._rules:  # one tuple read: a consistent set of rules
            if path.startswith(prefix):
                return behaviour
        return Ok()

    def deliveries(self) -> list[Delivery]:
        """Every request recorded so far (since the last :meth:`clear`), in arrival order."""
        with self._lock:
            return list(self._records)

    def count(self, prefix: str | None = None) -> int:
        """How many requests arrived (to paths starting with ``prefix``, when given)."""
        with self._lock:
            records = self._records
            if prefix is None:
                return len(records)
            records = list(records)
        return sum(1 for delivery in records if delivery.path.startswith(prefix))

    def clear(self) -> None:
        """Forget the deliveries recorded so far (requests in progress update the old list)."""
        with self._lock:
            self._records = []

    async def _handle(self, request: web.Request) -> web.Response:
        arrived = time.time()
        headers = request.headers
        delivery = Delivery(
            headers.get(EXECUTION_ID_HEADER, ""),
            headers.get(JOB_ID_HEADER, ""),
            parse_slot(headers.get(SCHEDULED_AT_HEADER)),
            _parse_int(headers.get(ATTEMPT_HEADER)),
            arrived,
            request.path,
        )
        records, index = self._record(delivery)
        response = await _answer(self.behaviour_for(request.path))  # cancelled if the client leaves
        self._answered(records, index, delivery, response.status)
        return response

    async def _deliver(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Any:
        """The gRPC witness's one method: recorded as the HTTP handler records, then answered."""
        arrived = time.time()
        metadata = {key: str(value) for key, value in context.invocation_metadata() or ()}
        delivery = Delivery(
            metadata.get(EXECUTION_ID_HEADER.lower(), ""),
            metadata.get(JOB_ID_HEADER.lower(), ""),
            parse_slot(metadata.get(SCHEDULED_AT_HEADER.lower())),
            _parse_int(metadata.get(ATTEMPT_HEADER.lower())),
            arrived,
            GRPC_PATH,
        )
        records, index = self._record(delivery)
        behaviour = self.behaviour_for(GRPC_PATH)
        status = await _grpc_status(behaviour)  # cancelled if the client leaves
        self._answered(records, index, delivery, status)
        if status == 429:
            await context.abort(grpc.StatusCode.RESOURCE_EXHAUSTED, "throttled")
        if status >= 300:
            await context.abort(grpc.StatusCode.INTERNAL, f"error {status}")
        return empty_pb2.Empty()

    def _record(self, delivery: Delivery) -> tuple[list[Delivery], int]:
        with self._lock:
            records = self._records
            records.append(delivery)
            return records, len(records) - 1

    def _answered(self, records: list[Delivery], index: int, delivery: Delivery, status: int) -> None:
        with self._lock:
            records[index] = replace(delivery, answered=status)


async def _answer(behaviour: Behaviour) -> web.Response:
    match behaviour:
        case Ok():
            return web.Response(text="ok")
        case Slow(seconds, status):
            await asyncio.sleep(seconds)
            return web.Response(status=status, text="slow")
        case Error(status):
            return web.Response(status=status, text="error")
        case Throttle(retry_after_s):
            retry_after = str(math.ceil(retry_after_s))
            return web.Response(status=429, headers={"Retry-After": retry_after}, text="throttled")
        case Hang():
            await asyncio.get_running_loop().create_future()  # until the handler is cancelled
    raise AssertionError(f"unknown behaviour {behaviour!r}")


async def _grpc_status(behaviour: Behaviour) -> int:
    """The HTTP status ``behaviour`` stands for, after its wait (``Hang``: never)."""
    match behaviour:
        case Ok():
            return 200
        case Slow(seconds, status):
            await asyncio.sleep(seconds)
            return status
        case Error(status):
            return status
        case Throttle():
            return 429
        case Hang():
            await asyncio.get_running_loop().create_future()
    raise AssertionError(f"unknown behaviour {behaviour!r}")


def _witness_pool() -> descriptor_pool.DescriptorPool:
    """``cwchaos/witness.proto``: ``service Witness { rpc Deliver(Struct) returns (Empty); }``."""
    pool = descriptor_pool.DescriptorPool()
    for module in (struct_pb2, empty_pb2):
        proto = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(proto)
        pool.Add(proto)
    file = descriptor_pb2.FileDescriptorProto(
        name="cwchaos/witness.proto",
        package="cwchaos",
        syntax="proto3",
        dependency=["google/protobuf/struct.proto", "google/protobuf/empty.proto"],
    )
    service = file.service.add(name="Witness")
    service.method.add(
        name="Deliver", input_type=".google.protobuf.Struct", output_type=".google.protobuf.Empty"
    )
    pool.Add(file)
    return pool


async def _start_grpc(deliver: Any) -> tuple[grpc.aio.Server, int]:
    pool = _witness_pool()
    request: Any = message_factory.GetMessageClass(pool.FindMessageTypeByName("google.protobuf.Struct"))
    server = grpc.aio.server(maximum_concurrent_rpcs=None)
    handler = grpc.unary_unary_rpc_method_handler(
        deliver, request_deserializer=request.FromString, response_serializer=_serialize
    )
    server.add_generic_rpc_handlers(
        [grpc.method_handlers_generic_handler(GRPC_SERVICE, {"Deliver": handler})]
    )
    reflection.enable_server_reflection([GRPC_SERVICE, reflection.SERVICE_NAME], server, pool=pool)
    port = server.add_insecure_port(f"{HOST}:0")
    await server.start()
    return server, port


def _serialize(message: Any) -> bytes:
    data: bytes = message.SerializeToString()
    return data


# -- the command target's lines ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CommandLine:
    """One line of ``chaos_append.py``: ``start`` when an attempt's program began, ``done`` when it
    finished its sleep (a killed attempt has a start and no done)."""

    kind: Literal["start", "done"]
    execution_id: str
    job_id: str
    slot: datetime  # aware UTC
    attempt: int
    at: float  # time.time() when written
    pid: int
    child_pid: int | None  # the grandchild spawned with --spawn-child


def append_argv(
    file: str | Path, *, sleep_s: float | None = None, spawn_child: bool = False
) -> tuple[str, ...]:
    """The command target's argv: this interpreter running ``chaos_append.py`` (absolute path)."""
    argv = [sys.executable, str(APPEND_SCRIPT), str(file)]
    if sleep_s is not None:
        argv += ["--sleep", f"{sleep_s:g}"]
    if spawn_child:
        argv.append("--spawn-child")
    return tuple(argv)


def parse_command_line(text: str) -> CommandLine:
    """One line; ``ValueError`` if it is not ``kind id job slot attempt at pid [child]``."""
    fields = text.split()
    if len(fields) not in (7, 8) or fields[0] not in ("start", "done"):
        raise ValueError(f"not a chaos_append line: {text!r}")
    slot = datetime.fromisoformat(fields[3])
    if slot.tzinfo is None:
        raise ValueError(f"slot without an offset: {text!r}")
    kind: Literal["start", "done"] = "start" if fields[0] == "start" else "done"
    return CommandLine(
        kind=kind,
        execution_id=fields[1],
        job_id=fields[2],
        slot=slot.astimezone(UTC),
        attempt=int(fields[4]),
        at=float(fields[5]),
        pid=int(fields[6]),
        child_pid=int(fields[7]) if len(fields) == 8 else None,
    )


def read_command_lines(path: str | Path) -> list[CommandLine]:
    """Every line of the file in order; [] when it does not exist yet. Lines are written whole (one
    ``write`` on an ``O_APPEND`` descriptor), so a malformed one is an error, not a torn write."""
    try:
        text = Path(path).read_text()
    except FileNotFoundError:
        return []
    lines = []
    for number, line in enumerate(text.splitlines(), 1):
        if line.strip():
            try:
                lines.append(parse_command_line(line))
            except ValueError as error:
                raise ValueError(f"{path}:{number}: {error}") from None
    return lines


# -- the witness in a process of its own -----------------------------------------------------------

_BEHAVIOURS: dict[str, type[Behaviour]] = {cls.__name__: cls for cls in (Ok, Slow, Error, Throttle, Hang)}
CONTROL = "/_witness"  # the control paths of a witness process (never recorded)


def _behaviour_to_json(behaviour: Behaviour) -> dict[str, object]:
    return {"kind": type(behaviour).__name__, **asdict(behaviour)}


def _behaviour_from_json(data: dict[str, Any]) -> Behaviour:
    kind = _BEHAVIOURS[str(data.pop("kind"))]
    return kind(**data)


def _delivery_to_json(delivery: Delivery) -> dict[str, object]:
    return {**asdict(delivery), "slot": delivery.slot.isoformat()}


def _delivery_from_json(data: dict[str, Any]) -> Delivery:
    return Delivery(**{**data, "slot": datetime.fromisoformat(data["slot"])})


class WitnessProcess:
    """The witness in its own process: its arrival stamps never wait for the test process's GIL
    (a busy test thread would otherwise make deliveries look late). Same interface as
    :class:`Witness`, over control requests to ``/_witness/...``."""

    def __init__(self, log: Path) -> None:
        self._process = subprocess.Popen(
            [sys.executable, str(Path(__file__)), "--serve"],
            stdout=subprocess.PIPE,
            stderr=log.open("ab"),
            text=True,
        )
        assert self._process.stdout is not None
        line = self._process.stdout.readline().strip()
        if not line.startswith("http://"):
            self._process.kill()
            raise AssertionError(f"the witness process did not start: {line!r} (log {log})")
        self.url = line
        self.grpc_address = (self._process.stdout.readline() or "").strip()  # the gRPC witness
        self._control = httpx.Client(base_url=f"{line}{CONTROL}", timeout=30)

    def behave(self, prefix: str, behaviour: Behaviour) -> None:
        response = self._control.post("/behave", json={"prefix": prefix, **_behaviour_to_json(behaviour)})
        response.raise_for_status()

    def deliveries(self) -> list[Delivery]:
        response = self._control.get("/deliveries")
        response.raise_for_status()
        return [_delivery_from_json(item) for item in response.json()]

    def count(self, prefix: str | None = None) -> int:
        response = self._control.get("/count", params={} if prefix is None else {"prefix": prefix})
        response.raise_for_status()
        return int(response.json())

    def close(self) -> None:
        self._control.close()
        self._process.terminate()
        try:
            self._process.wait(10)
        except subprocess.TimeoutExpired:
            self._process.kill()


def _control_routes(witness: Witness) -> list[web.RouteDef]:
    async def behave(request: web.Request) -> web.Response:
        data = await request.json()
        witness.behave(data.pop("prefix"), _behaviour_from_json(data))
        return web.json_response(True)

    async def deliveries(_: web.Request) -> web.Response:
        return web.json_response([_delivery_to_json(d) for d in witness.deliveries()])

    async def count(request: web.Request) -> web.Response:
        return web.json_response(witness.count(request.query.get("prefix")))

    return [
        web.post(f"{CONTROL}/behave", behave),
        web.get(f"{CONTROL}/deliveries", deliveries),
        web.get(f"{CONTROL}/count", count),
    ]


async def _serve() -> None:
    witness = Witness()
    await witness.start(extra_routes=_control_routes(witness))
    print(witness.url, flush=True)
    print(witness.grpc_address, flush=True)
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await stop.wait()
    await witness.close()


if __name__ == "__main__" and sys.argv[1:] == ["--serve"]:
    asyncio.run(_serve())
