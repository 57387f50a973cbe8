"""A small gRPC service for tests, built at test time from descriptor_pb2 (no generated code):
``cwtest.Echo/Say`` (unary) and ``cwtest.Echo/Watch`` (server streaming, never called), served by a
``grpc.aio`` server on 127.0.0.1 with server reflection on or off.

``Say`` records every call (request as JSON, metadata, peer) and answers by the request's
``name``: ``status:NAME`` aborts with that status code, ``sleep:SECONDS`` waits first, anything
else is greeted (``greeting`` ``hello NAME``, ``count`` doubled, ``at`` echoed)."""

from __future__ import annotations

import asyncio
import base64
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio
from google.protobuf import descriptor_pb2, descriptor_pool, json_format, message_factory, timestamp_pb2
from google.protobuf.message import Message
from grpc_reflection.v1alpha import reflection

SERVICE = "cwtest.Echo"
SAY = f"{SERVICE}/Say"
WATCH = f"{SERVICE}/Watch"
_F = descriptor_pb2.FieldDescriptorProto


def echo_file() -> descriptor_pb2.FileDescriptorProto:
    file = descriptor_pb2.FileDescriptorProto(
        name="cwtest/echo.proto",
        package="cwtest",
        syntax="proto3",
        dependency=["google/protobuf/timestamp.proto"],
    )
    request = file.message_type.add(name="Req")
    request.field.add(name="name", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    request.field.add(name="count", number=2, type=_F.TYPE_INT32, label=_F.LABEL_OPTIONAL)
    request.field.add(name="tags", number=3, type=_F.TYPE_STRING, label=_F.LABEL_REPEATED)
    request.field.add(
        name="at",
        number=4,
        type=_F.TYPE_MESSAGE,
        label=_F.LABEL_OPTIONAL,
        type_name=".google.protobuf.Timestamp",
    )
    response = file.message_type.add(name="Resp")
    response.field.add(name="greeting", number=1, type=_F.TYPE_STRING, label=_F.LABEL_OPTIONAL)
    response.field.add(name="count", number=2, type=_F.TYPE_INT32, label=_F.LABEL_OPTIONAL)
    response.field.add(
        name="at",
        number=3,
        type=_F.TYPE_MESSAGE,
        label=_F.LABEL_OPTIONAL,
        type_name=".google.protobuf.Timestamp",
    )
    service = file.service.add(name="Echo")
    service.method.add(name="Say", input_type=".cwtest.Req", output_type=".cwtest.Resp")
    service.method.add(
        name="Watch", input_type=".cwtest.Req", output_type=".cwtest.Resp", server_streaming=True
    )
    return file


def _timestamp_file() -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto()
    timestamp_pb2.DESCRIPTOR.CopyToProto(proto)
    return proto


POOL = descriptor_pool.DescriptorPool()
POOL.Add(_timestamp_file())
POOL.Add(echo_file())
Req: Any = message_factory.GetMessageClass(POOL.FindMessageTypeByName("cwtest.Req"))
Resp: Any = message_factory.GetMessageClass(POOL.FindMessageTypeByName("cwtest.Resp"))


def descriptor_set(include_imports: bool = True) -> str:
    """Base64 of the FileDescriptorSet ``protoc --include_imports`` would write for echo.proto."""
    files = [_timestamp_file(), echo_file()] if include_imports else [echo_file()]
    return base64.b64encode(descriptor_pb2.FileDescriptorSet(file=files).SerializeToString()).decode()


@dataclass(frozen=True, slots=True)
class Call:
    request: dict[str, Any]
    metadata: dict[str, str]
    peer: str  # "ipv4:127.0.0.1:PORT": the client's end of the connection


@dataclass
class EchoServer:
    reflection: bool = True
    host: str = "127.0.0.1"
    port: int = 0
    calls: list[Call] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)  # every RPC's method, reflection's included
    _server: grpc.aio.Server | None = None

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    async def start(self) -> EchoServer:
        server = grpc.aio.server(interceptors=[_Recorder(self.methods)])
        handler = grpc.unary_unary_rpc_method_handler(
            self._say, request_deserializer=Req.FromString, response_serializer=_serialize
        )
        server.add_generic_rpc_handlers([grpc.method_handlers_generic_handler(SERVICE, {"Say": handler})])
        if self.reflection:
            reflection.enable_server_reflection([SERVICE, reflection.SERVICE_NAME], server, pool=POOL)
        self.port = server.add_insecure_port(f"{self.host}:0")
        await server.start()
        self._server = server
        return self

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(None)
            self._server = None

    async def _say(self, request: Any, context: grpc.aio.ServicerContext[Any, Any]) -> Message:
        metadata = {key: str(value) for key, value in context.invocation_metadata() or ()}
        self.calls.append(Call(json_format.MessageToDict(request), metadata, context.peer()))
        name: str = request.name
        if name.startswith("status:"):
            code = name.removeprefix("status:").split(" ")[0]
            await context.abort(grpc.StatusCode[code], f"told to ({name})")
        if name.startswith("sleep:"):
            await asyncio.sleep(float(name.removeprefix("sleep:")))
        response: Message = Resp(greeting=f"hello {name}", count=request.count * 2)
        if request.HasField("at"):
            response.at.CopyFrom(request.at)  # type: ignore[attr-defined]
        return response


def _serialize(message: Message) -> bytes:
    return message.SerializeToString()


class _Recorder(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    def __init__(self, methods: list[str]) -> None:
        self._methods = methods

    async def intercept_service(self, continuation: Any, handler_call_details: Any) -> Any:
        self._methods.append(handler_call_details.method)
        return await continuation(handler_call_details)
