"""gRPC service targets: one unary call per attempt over pooled, guarded channels.

**The call.** The job's payload (a JSON object, or nothing: an empty request) becomes the
method's request message as grpcurl makes it: the method's descriptors come from the target's
server reflection (``grpc.reflection.v1alpha.ServerReflection``: the file defining the service,
then any import it did not send), or from the job's own ``descriptor_set`` when it has one
(no reflection is asked then); ``descriptor_pool`` builds them, ``message_factory`` makes the
message classes and ``json_format`` parses the payload into the request. The reflection client
is our own few lines over the pooled ``grpc.aio`` channel rather than grpcio-reflection's
``ProtoReflectionDescriptorDatabase``: that one takes a blocking ``grpc.Channel`` and makes its
calls without a deadline, which would hold a worker thread past the attempt's budget. It feeds
the same ``DescriptorDatabase`` and ``DescriptorPool``. Only unary methods are called.

Every call carries the execution id (``idempotency-key``), the job id (``x-cronwheel-job-id``),
the slot (``x-cronwheel-scheduled-at``, RFC 3339 UTC) and the attempt (``x-cronwheel-attempt``)
in its metadata, after the target's own metadata (ours win a clash), and the attempt's span
(``traceparent``) when tracing is on. The attempt's budget (:meth:`AttemptContext.budget_s`) is
the deadline of everything it does: resolving, reflecting and the call (``grpc-timeout``).

**Outcomes.** OK is ``SUCCESS``, the response kept as JSON (``json_format.MessageToJson``) in the
output, bounded as an HTTP body is (``output_limit``, then ``output_tail_bytes``).
DEADLINE_EXCEEDED is ``TIMEOUT``; UNAVAILABLE (nothing answered, or the server said so) is
``ERROR``; RESOURCE_EXHAUSTED, ABORTED, INTERNAL, UNKNOWN, CANCELLED and DATA_LOSS are a
``FAILURE`` that is retried; INVALID_ARGUMENT, NOT_FOUND, PERMISSION_DENIED, UNAUTHENTICATED,
UNIMPLEMENTED, FAILED_PRECONDITION, ALREADY_EXISTS and OUT_OF_RANGE are a *final* ``FAILURE``
(:attr:`AttemptResult.final`: no retry, whatever attempts remain). The error reads
``grpc status NAME: message``. A payload that does not convert (an unknown field, a wrong type),
a method the descriptors lack, a streaming method, or a server without reflection when the job
has no descriptor set are final failures too, naming the field or what is missing.

**Channels** are pooled per (address, tls) and closed once unused for
``WorkerSettings.grpc_idle_s`` (a sweep at each attempt and a reaper task while any is open), and
all of them on :meth:`GrpcExecutor.close`: an idle worker holds no connection (dkron#1236 leaked
them). The next attempt opens a new channel, resolving the host again.

**SSRF guard**, as for HTTP (:mod:`cronwheel.worker.executors.http`): the address's host is
judged first as the service judged it (:func:`cronwheel.targets.ssrf.url_refusal`); then the worker
resolves the host itself and refuses the whole answer if any address is refused
(:func:`cronwheel.targets.ssrf.address_refusal`, ``WorkerSettings.allowed_networks``); the channel is
opened to exactly those checked addresses (``ipv4:a.b.c.d:port``; the host name goes as the
``:authority`` and the TLS name), so nothing resolved later can slip past the check, and gRPC's
HTTP proxy support is off. A refused attempt is ``ERROR`` and no connection is made.

**Descriptors** found by reflection are cached per (address, tls, method) for
``grpc_descriptor_ttl_s``, at most ``grpc_descriptor_entries`` of them (least recently used go
first), and fetched again at once when a payload does not convert with a cached one (the service
may have changed), or on the next attempt after an UNIMPLEMENTED or an undecodable response.

Metadata values may be secret references, resolved for the attempt (:mod:`cronwheel.secrets.resolve`)
and redacted from everything the attempt keeps; no value is ever logged.
"""

from __future__ import annotations

import asyncio
import collections
import ipaddress
import logging
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import grpc
import grpc.aio
from google.protobuf import descriptor_pb2, json_format, message_factory
from google.protobuf.descriptor import MethodDescriptor
from google.protobuf.message import Message
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc
from yarl import URL

from cronwheel.clock import Clock, SystemClock, monotonic_of
from cronwheel.errors import InvalidInputError
from cronwheel.model import AttemptResult, GrpcTarget, Outcome
from cronwheel.secrets.resolve import SecretResolver
from cronwheel.targets.checks import find_method, grpc_address, method_descriptor
from cronwheel.targets.kinds.grpc import check_grpc
from cronwheel.targets.ssrf import address_refusal, parse_networks, url_refusal
from cronwheel.worker.executors.base import AttemptContext, WorkerSettings, head_text, rfc3339, with_secrets

log = logging.getLogger(__name__)

__all__ = ["STATUS_OUTCOMES", "GrpcExecutor", "Resolve"]

Resolve = Callable[[str, int], Awaitable[list[str]]]
"""Resolves ``(host, port)`` to IP addresses (the default asks ``getaddrinfo``; tests inject one)."""

_S = grpc.StatusCode
STATUS_OUTCOMES: dict[grpc.StatusCode, tuple[Outcome, bool]] = {
    _S.DEADLINE_EXCEEDED: (Outcome.TIMEOUT, False),
    _S.UNAVAILABLE: (Outcome.ERROR, False),
    _S.RESOURCE_EXHAUSTED: (Outcome.FAILURE, False),
    _S.ABORTED: (Outcome.FAILURE, False),
    _S.INTERNAL: (Outcome.FAILURE, False),
    _S.UNKNOWN: (Outcome.FAILURE, False),
    _S.CANCELLED: (Outcome.FAILURE, False),
    _S.DATA_LOSS: (Outcome.FAILURE, False),
    _S.INVALID_ARGUMENT: (Outcome.FAILURE, True),
    _S.NOT_FOUND: (Outcome.FAILURE, True),
    _S.PERMISSION_DENIED: (Outcome.FAILURE, True),
    _S.UNAUTHENTICATED: (Outcome.FAILURE, True),
    _S.UNIMPLEMENTED: (Outcome.FAILURE, True),
    _S.FAILED_PRECONDITION: (Outcome.FAILURE, True),
    _S.ALREADY_EXISTS: (Outcome.FAILURE, True),
    _S.OUT_OF_RANGE: (Outcome.FAILURE, True),
}
"""A status other than OK as (outcome, final): final means no retry can succeed."""

_EOF: Any = getattr(grpc.aio, "EOF")  # noqa: B009 - what read() returns at the end (not in grpc-stubs)
MAX_DETAILS = 1000  # characters of a status message kept in the attempt's error


class _RefusedError(Exception):
    """The attempt cannot be made; ``result`` says why (nothing was sent)."""

    def __init__(self, result: AttemptResult) -> None:
        super().__init__(result.error)
        self.result = result


def _final(error: str) -> _RefusedError:
    return _RefusedError(AttemptResult(Outcome.FAILURE, error=error, final=True))


@dataclass(frozen=True, slots=True)
class _Method:
    """A unary method's full name and its message classes."""

    path: str  # "/package.Service/Method"
    request: type[Message]
    response: type[Message]


@dataclass(slots=True)
class _Pooled:
    channel: grpc.aio.Channel
    last_used: float
    users: int = 0


class GrpcExecutor:
    """Makes gRPC attempts over channels pooled per (address, tls)."""

    def __init__(
        self,
        settings: WorkerSettings | None = None,
        *,
        clock: Clock | None = None,
        secrets: SecretResolver | None = None,
        resolve: Resolve | None = None,
    ) -> None:
        self._settings = settings or WorkerSettings()
        self._secrets = secrets or SecretResolver(None, None)
        self._allowed = parse_networks(self._settings.allowed_networks)
        self._clock: Clock = clock or SystemClock()
        self._monotonic = monotonic_of(self._clock)
        self._resolve: Resolve = resolve or _getaddrinfo
        self._channels: dict[tuple[str, bool], _Pooled] = {}
        self._methods: collections.OrderedDict[tuple[str, bool, str], tuple[float, _Method]] = (
            collections.OrderedDict()
        )
        self._sets: collections.OrderedDict[tuple[str, str], _Method] = collections.OrderedDict()
        self._reaper: asyncio.Task[None] | None = None

    # -- the pool ---------------------------------------------------------------------------------

    def open_channels(self) -> list[tuple[str, bool]]:
        """The (address, tls) of every channel open now."""
        return list(self._channels)

    async def close_idle(self) -> int:
        """Close the channels nothing has used for ``grpc_idle_s``; how many were closed."""
        cutoff = self._monotonic.monotonic() - self._settings.grpc_idle_s
        idle = [key for key, held in self._channels.items() if held.users == 0 and held.last_used <= cutoff]
        for key in idle:
            pooled = self._channels.pop(key)
            await pooled.channel.close(None)
            log.debug("grpc channel closed (idle) address=%s tls=%s", key[0], key[1])
        return len(idle)

    async def close(self) -> None:
        reaper, self._reaper = self._reaper, None
        if reaper is not None:
            reaper.cancel()
            await asyncio.gather(reaper, return_exceptions=True)
        channels, self._channels = list(self._channels.values()), {}
        for pooled in channels:
            await pooled.channel.close(None)

    async def _reap(self) -> None:
        every = min(max(self._settings.grpc_idle_s / 2, 0.05), 30.0)
        while self._channels:
            await asyncio.sleep(every)
            await self.close_idle()
        self._reaper = None

    async def _channel(self, url: URL, tls: bool) -> _Pooled:
        """The pooled channel to ``url``'s host and port, opened (resolved and checked) if need be."""
        key = (_authority(url), tls)
        pooled = self._channels.get(key)
        if pooled is None:
            target = await self._checked_target(url)
            pooled = self._channels.get(key)  # another attempt may have opened it meanwhile
            if pooled is None:
                pooled = _Pooled(_open(target, url, tls), self._monotonic.monotonic())
                self._channels[key] = pooled
                if self._reaper is None:
                    self._reaper = asyncio.create_task(self._reap(), name="grpc-channel-reaper")
        return pooled

    async def _checked_target(self, url: URL) -> str:
        """The gRPC target naming every address ``url``'s host resolves to, each one checked."""
        host, port = url.raw_host or "", url.port or 0
        try:
            ipaddress.ip_address(host)
            addresses = [host]
        except ValueError:
            try:
                addresses = await self._resolve(host, port)
            except OSError as error:
                error_text = f"cannot resolve {host}: {_os_text(error)}"
                raise _RefusedError(AttemptResult(Outcome.ERROR, error=error_text)) from None
        if not addresses:
            raise _RefusedError(AttemptResult(Outcome.ERROR, error=f"cannot resolve {host}: no addresses"))
        for address in addresses:
            reason = address_refusal(address, self._allowed)
            if reason is not None:
                where = f"{host} resolves to {address}" if host != address else address
                refused = f"refused by the SSRF guard: {where} is {reason} (not in allowed_networks)"
                raise _RefusedError(AttemptResult(Outcome.ERROR, error=refused))
        v4 = [address for address in addresses if ":" not in address]
        if v4:
            return "ipv4:" + ",".join(f"{address}:{port}" for address in dict.fromkeys(v4))
        return "ipv6:" + ",".join(f"[{address.split('%')[0]}]:{port}" for address in dict.fromkeys(addresses))

    # -- one attempt -------------------------------------------------------------------------------

    async def execute(self, target: GrpcTarget, ctx: AttemptContext) -> AttemptResult:
        """Resolve the target's secrets, make the call, and keep none of them in the result."""
        await self.close_idle()
        return await with_secrets(
            self._secrets, ctx.team, target, lambda resolved: self._attempt(resolved.target(target), ctx)
        )

    async def _attempt(self, target: GrpcTarget, ctx: AttemptContext) -> AttemptResult:
        try:
            refusal = url_refusal(grpc_address(target.address), self._allowed)  # first: the sharper reason
            if refusal is not None:
                return AttemptResult(
                    Outcome.ERROR, error=f"refused by the SSRF guard: {refusal} (not in allowed_networks)"
                )
            url = check_grpc(target)
        except InvalidInputError as error:
            return AttemptResult(Outcome.ERROR, error=str(error))
        budget = ctx.budget_s(self._clock.now())
        if budget <= 0:
            return AttemptResult(Outcome.TIMEOUT, error="the attempt's deadline passed before it started")
        loop = asyncio.get_running_loop()
        started = loop.time()
        try:
            async with asyncio.timeout(budget):
                result = await self._call(target, url, ctx, started + budget)
        except TimeoutError:
            return AttemptResult(Outcome.TIMEOUT, error=f"no response within {budget:g} s")
        except _RefusedError as refused:
            return refused.result
        log.debug(
            "grpc attempt job=%s run=%s attempt=%d %s %s -> %s in %.3f s",
            ctx.job_id,
            ctx.execution_id,
            ctx.attempt,
            _authority(url),
            target.method,
            result.outcome.value,
            loop.time() - started,
        )
        return result

    async def _call(self, target: GrpcTarget, url: URL, ctx: AttemptContext, end: float) -> AttemptResult:
        pooled = await self._channel(url, target.tls)
        pooled.users += 1
        try:
            method, fresh = await self._method(target, pooled.channel, end)
            request, problem = _request(method, ctx.payload)
            if problem is not None and not fresh:  # the service may have changed: ask it again
                self._forget(target)
                method, fresh = await self._method(target, pooled.channel, end)
                request, problem = _request(method, ctx.payload)
            if problem is not None:
                return AttemptResult(Outcome.FAILURE, error=problem, final=True)
            assert request is not None
            call = pooled.channel.unary_unary(
                method.path,
                request_serializer=_serialize,
                response_deserializer=method.response.FromString,
            )
            try:
                response = await call(request, timeout=_remaining(end), metadata=_metadata(target, ctx))
            except grpc.aio.AioRpcError as error:
                if _stale(error.code(), error.details()):
                    self._forget(target)
                return _status_result(error.code(), error.details())
            return self._success(response)
        finally:
            pooled.users -= 1
            pooled.last_used = self._monotonic.monotonic()

    def _success(self, response: Message) -> AttemptResult:
        body = json_format.MessageToJson(response, indent=None, ensure_ascii=False).encode()
        limit = self._settings.output_limit
        kept = max(limit, self._settings.output_tail_bytes)
        return AttemptResult(
            Outcome.SUCCESS,
            output=head_text(body, limit),
            output_tail=head_text(body, kept) if len(body) > limit else None,
        )

    # -- descriptors --------------------------------------------------------------------------------

    async def _method(
        self, target: GrpcTarget, channel: grpc.aio.Channel, end: float
    ) -> tuple[_Method, bool]:
        """The method's classes, and whether they were fetched for this attempt (not cached)."""
        if target.descriptor_set is not None:
            return self._from_set(target.descriptor_set, target.method), True
        key = (target.address, target.tls, target.method)
        now = self._monotonic.monotonic()
        cached = self._methods.get(key)
        if cached is not None and cached[0] > now:
            self._methods.move_to_end(key)
            return cached[1], False
        files = await _reflect(channel, target.method.partition("/")[0], end)
        try:
            method = _classes(find_method(files, target.method, "the target's server reflection"))
        except InvalidInputError as error:
            raise _final(str(error)) from None
        self._methods[key] = (now + self._settings.grpc_descriptor_ttl_s, method)
        self._methods.move_to_end(key)
        while len(self._methods) > self._settings.grpc_descriptor_entries:
            self._methods.popitem(last=False)
        return method, True

    def _from_set(self, descriptor_set: str, name: str) -> _Method:
        key = (descriptor_set, name)
        method = self._sets.get(key)
        if method is None:
            try:
                method = _classes(method_descriptor(descriptor_set, name))
            except InvalidInputError as error:
                raise _final(str(error)) from None
            self._sets[key] = method
            while len(self._sets) > self._settings.grpc_descriptor_entries:
                self._sets.popitem(last=False)
        self._sets.move_to_end(key)
        return method

    def _forget(self, target: GrpcTarget) -> None:
        self._methods.pop((target.address, target.tls, target.method), None)


# -- helpers -----------------------------------------------------------------------------------------


def _authority(url: URL) -> str:
    host = url.raw_host or ""
    return f"[{host}]:{url.port}" if ":" in host else f"{host}:{url.port}"


def _open(target: str, url: URL, tls: bool) -> grpc.aio.Channel:
    options: list[tuple[str, Any]] = [
        ("grpc.enable_http_proxy", 0),  # no proxy from the environment: the guard sees the real peer
        ("grpc.default_authority", _authority(url)),
        # the channel's own connections: closing it closes them (the global pool would keep them)
        ("grpc.use_local_subchannel_pool", 1),
    ]
    if not tls:
        return grpc.aio.insecure_channel(target, options=options)
    options.append(("grpc.ssl_target_name_override", url.host or ""))  # the name the certificate holds
    return grpc.aio.secure_channel(target, grpc.ssl_channel_credentials(), options=options)


async def _getaddrinfo(host: str, port: int) -> list[str]:
    answers = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return [str(sockaddr[0]) for _, _, _, _, sockaddr in answers]


def _os_text(error: OSError) -> str:
    return error.strerror or str(error) or type(error).__name__


def _remaining(end: float) -> float:
    return max(end - asyncio.get_running_loop().time(), 0.001)


def _serialize(message: Message) -> bytes:
    return message.SerializeToString()


def _metadata(target: GrpcTarget, ctx: AttemptContext) -> tuple[tuple[str, str], ...]:
    ours = {
        "idempotency-key": ctx.execution_id,
        "x-cronwheel-job-id": ctx.job_id,
        "x-cronwheel-scheduled-at": rfc3339(ctx.scheduled_at),
        "x-cronwheel-attempt": str(ctx.attempt),
    }
    ours.update((name.lower(), value) for name, value in ctx.trace_headers)
    theirs = [(name, value) for name, value in target.metadata if name not in ours]
    assert all(isinstance(value, str) for _, value in theirs), "secret references are resolved first"
    return (*((name, str(value)) for name, value in theirs), *ours.items())


def _stale(code: grpc.StatusCode, details: str | None) -> bool:
    """Whether a status says the cached descriptors may be out of date: the method is gone, or a
    message did not decode on one side ("Exception deserializing ...")."""
    return code is _S.UNIMPLEMENTED or (code is _S.INTERNAL and "deserializ" in (details or "").lower())


def _status_result(code: grpc.StatusCode, details: str | None) -> AttemptResult:
    outcome, final = STATUS_OUTCOMES.get(code, (Outcome.FAILURE, False))
    text = details or ""
    if len(text) > MAX_DETAILS:
        text = text[:MAX_DETAILS] + "..."
    error = f"grpc status {code.name}: {text}" if text else f"grpc status {code.name}"
    return AttemptResult(outcome, error=error, final=final)


def _request(method: _Method, payload: Any) -> tuple[Message | None, str | None]:
    """The request message the payload makes, or why it makes none (naming the field)."""
    request = method.request()
    if payload is None:
        return request, None
    name = request.DESCRIPTOR.full_name
    if not isinstance(payload, dict):
        return None, f"the payload must be a JSON object: it becomes the request message {name}"
    try:
        json_format.ParseDict(payload, request)
    except json_format.ParseError as error:
        return None, f"the payload does not convert to {name}: {error}"
    return request, None


def _classes(method: MethodDescriptor) -> _Method:
    if method.client_streaming or method.server_streaming:
        raise InvalidInputError(
            f"{method.containing_service.full_name}/{method.name} is a streaming method; "
            "only unary methods are called"
        )
    return _Method(
        path=f"/{method.containing_service.full_name}/{method.name}",
        request=message_factory.GetMessageClass(method.input_type),
        response=message_factory.GetMessageClass(method.output_type),
    )


async def _reflect(
    channel: grpc.aio.Channel, service: str, end: float
) -> list[descriptor_pb2.FileDescriptorProto]:
    """The files defining ``service`` and everything they import, from the server's reflection."""
    stub: Any = reflection_pb2_grpc.ServerReflectionStub(channel)
    call = stub.ServerReflectionInfo(timeout=_remaining(end))
    files: dict[str, descriptor_pb2.FileDescriptorProto] = {}
    try:
        request = reflection_pb2.ServerReflectionRequest
        await _ask(call, request(file_containing_symbol=service), files, service)
        while missing := _missing(files):
            await _ask(call, request(file_by_filename=missing), files, missing)
        await call.done_writing()
    except grpc.aio.AioRpcError as error:
        if error.code() == _S.UNIMPLEMENTED:
            raise _final(
                "the target has no server reflection (grpc status UNIMPLEMENTED): "
                "give the job a descriptor_set defining the method"
            ) from None
        status = _status_result(error.code(), f"server reflection: {error.details() or ''}")
        raise _RefusedError(status) from None
    finally:
        call.cancel()
    return list(files.values())


async def _ask(
    call: Any, request: reflection_pb2.ServerReflectionRequest, files: dict[str, Any], what: str
) -> None:
    await call.write(request)
    response = await call.read()
    if response is _EOF:
        raise _RefusedError(AttemptResult(Outcome.ERROR, error="server reflection: the stream ended early"))
    if response.HasField("error_response"):
        raise _final(
            f"the target's server reflection does not know {what} ({response.error_response.error_message})"
        )
    for data in response.file_descriptor_response.file_descriptor_proto:
        file = descriptor_pb2.FileDescriptorProto.FromString(data)
        files.setdefault(file.name, file)


def _missing(files: dict[str, descriptor_pb2.FileDescriptorProto]) -> str | None:
    for file in files.values():
        for dependency in file.dependency:
            if dependency not in files:
                return str(dependency)
    return None
