"""Attempts per second of one worker process's executor: gRPC beside HTTP (a benchmark, not a test).

Method. A sink in its own process (so its CPU is not the worker's) on 127.0.0.1: a ``grpc.aio``
server with reflection serving ``bench.Sink/Deliver`` (request ``google.protobuf.Struct``, reply
``google.protobuf.Empty``), and an aiohttp server answering ``200 ok``. This process makes N
attempts, C at a time, with the real :class:`GrpcExecutor` and :class:`HttpExecutor` (SSRF guard
allowing loopback, as the tests do) and the same small JSON payload, and reports attempts/s and
its own CPU ms per attempt (``time.process_time``). No store, no queue: this is the executors'
ceiling, the figure to read a whole worker's deliveries/s (``bench_webhooks.py``) against.

    .venv/bin/python benchmarks/bench_grpc_target.py [--attempts 5000] [--concurrency 64]
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys
import time
from datetime import UTC, datetime
from typing import Any

PAYLOAD = {"report": "nightly", "rows": 1234, "tags": ["a", "b"]}


def _serve() -> None:
    import grpc
    import grpc.aio
    from aiohttp import web
    from google.protobuf import descriptor_pb2, descriptor_pool, empty_pb2, message_factory, struct_pb2
    from grpc_reflection.v1alpha import reflection

    pool = descriptor_pool.DescriptorPool()
    for module in (struct_pb2, empty_pb2):
        proto = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(proto)
        pool.Add(proto)
    file = descriptor_pb2.FileDescriptorProto(
        name="bench/sink.proto",
        package="bench",
        syntax="proto3",
        dependency=["google/protobuf/struct.proto", "google/protobuf/empty.proto"],
    )
    file.service.add(name="Sink").method.add(
        name="Deliver", input_type=".google.protobuf.Struct", output_type=".google.protobuf.Empty"
    )
    pool.Add(file)
    request: Any = message_factory.GetMessageClass(pool.FindMessageTypeByName("google.protobuf.Struct"))

    async def deliver(_request: Any, _context: Any) -> Any:
        return empty_pb2.Empty()

    async def ok(_request: web.Request) -> web.Response:
        return web.Response(text="ok")

    async def main() -> None:
        server = grpc.aio.server()
        handler = grpc.unary_unary_rpc_method_handler(
            deliver,
            request_deserializer=request.FromString,
            response_serializer=lambda m: m.SerializeToString(),
        )
        server.add_generic_rpc_handlers(
            [grpc.method_handlers_generic_handler("bench.Sink", {"Deliver": handler})]
        )
        reflection.enable_server_reflection(["bench.Sink"], server, pool=pool)
        grpc_port = server.add_insecure_port("127.0.0.1:0")
        await server.start()
        app = web.Application()
        app.router.add_post("/{tail:.*}", ok)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0, backlog=1024).start()
        http_port = runner.addresses[0][1]
        print(grpc_port, http_port, flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # until the parent closes it
        await server.stop(None)
        await runner.cleanup()

    asyncio.run(main())


async def _measure(kind: str, port: int, attempts: int, concurrency: int) -> dict[str, float]:
    from cronwheel.model import GrpcTarget, HttpTarget, Outcome
    from cronwheel.worker.executors import AttemptContext, HttpExecutor, WorkerSettings
    from cronwheel.worker.executors.grpc import GrpcExecutor

    settings = WorkerSettings(allowed_networks=("127.0.0.0/8",))
    executor: Any
    target: Any
    if kind == "grpc":
        executor, target = GrpcExecutor(settings), GrpcTarget(f"127.0.0.1:{port}", "bench.Sink/Deliver")
    else:
        executor, target = HttpExecutor(settings), HttpTarget(f"http://127.0.0.1:{port}/hook")
    slot = datetime(2026, 1, 1, tzinfo=UTC)
    failures = 0

    async def one(index: int) -> None:
        nonlocal failures
        ctx = AttemptContext(f"run-{index}", "job-1", "bench", "t", slot, 1, 30.0, payload=PAYLOAD)
        result = await executor.execute(target, ctx)
        if result.outcome is not Outcome.SUCCESS:
            failures += 1

    await asyncio.gather(*(one(-i) for i in range(concurrency)))  # warm up: connect, reflect
    queue = iter(range(attempts))

    async def lane() -> None:
        for index in queue:
            await one(index)

    cpu, wall = time.process_time(), time.perf_counter()
    await asyncio.gather(*(lane() for _ in range(concurrency)))
    cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
    await executor.close()
    return {"per_s": attempts / wall, "cpu_ms": cpu * 1000 / attempts, "failures": failures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attempts", type=int, default=5000)
    parser.add_argument("--concurrency", type=int, default=64)
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        _serve()
        return
    sink = subprocess.Popen(
        [sys.executable, __file__, "--serve"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    try:
        assert sink.stdout is not None
        grpc_port, http_port = (int(part) for part in sink.stdout.readline().split())
        print(f"{args.attempts} attempts, {args.concurrency} at a time, sink in its own process")
        print(f"{'target':8} {'attempts/s':>11} {'cpu ms/attempt':>15} {'failures':>9}")
        for kind, port in (("http", http_port), ("grpc", grpc_port)):
            figures = asyncio.run(_measure(kind, port, args.attempts, args.concurrency))
            print(
                f"{kind:8} {figures['per_s']:>11.0f} {figures['cpu_ms']:>15.3f} {figures['failures']:>9.0f}"
            )
    finally:
        if sink.stdin is not None:
            sink.stdin.close()
        sink.wait(10)


if __name__ == "__main__":
    main()
