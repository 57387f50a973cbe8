"""Who is calling a gRPC method, whether it may, and how its failure is answered.

Every method opens a :class:`Call`, which does what REST does around a route, in REST's order,
with REST's own pieces and the services' one instance of each (so REST and gRPC calls count
together):

1. ``authorization: Bearer <token>`` from the call's metadata is authenticated exactly as REST
   does (:func:`cronwheel.api.callers.auth.authenticate`: the store's API tokens, then OIDC), so the same
   tokens, scopes and team walls hold; a failure takes from the buckets of the peer's address and
   of the token id, and spent buckets refuse a credential before it is checked, as REST's do
   (:mod:`cronwheel.api.callers.failures`): RESOURCE_EXHAUSTED.
2. The caller's rate bucket (:mod:`cronwheel.api.guards.rate`, REST's ``rate_limit``) admits the call,
   or it is RESOURCE_EXHAUSTED with a ``google.rpc.RetryInfo`` of the seconds REST puts in
   ``Retry-After``.
4. Every string of the request is checked for what both stores can hold
   (:mod:`cronwheel.api.schemas.storable`, REST's check): INVALID_ARGUMENT naming the field.

Any exception inside the call is answered once, by :mod:`cronwheel.grpc_api.errors`, with a
status code and ``google.rpc`` details; a refusal REST audits (401, 403, 404 at a team's wall) is
audited first, by the function REST's handlers call (:func:`cronwheel.api.callers.auditing.record_refusal`),
naming the request ``gRPC /cronwheel.v1.<Service>/<Method>`` (:class:`MethodNames` tells the call
its method).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import grpc
from google.protobuf.message import DecodeError

from cronwheel.api.callers.auditing import record_refusal
from cronwheel.api.callers.auth import authenticate
from cronwheel.api.guards.rate import caller_key
from cronwheel.api.schemas.storable import entry, unstorable_path
from cronwheel.api.schemas.storable import refusal as unstorable
from cronwheel.api.services import ApiServices
from cronwheel.audit import Actor
from cronwheel.auth.identity import Caller
from cronwheel.errors import ForbiddenError, HiddenError, InvalidInputError, UnauthenticatedError
from cronwheel.grpc_api.convert import to_dict
from cronwheel.grpc_api.errors import grpc_status

PACKAGE = "/cronwheel.v1."
METHOD: ContextVar[str] = ContextVar("cronwheel_grpc_method", default="(unknown method)")
"""The full name of the method being served (``/cronwheel.v1.JobService/GetJob``)."""
REQUEST: ContextVar[Any] = ContextVar("cronwheel_grpc_request", default=None)
"""The request message of the call being served (checked by :class:`Call` once it is admitted)."""


def bearer(context: Any) -> str | None:
    """The credential of ``authorization: Bearer <credential>`` in the call's metadata; a call
    with two ``authorization`` entries is INVALID_ARGUMENT, as REST answers two ``Authorization``
    headers 400 (:mod:`cronwheel.api.guards.host`): no part may read another credential than the next."""
    values = [value for key, value in context.invocation_metadata() or () if key == "authorization"]
    if len(values) > 1:
        raise InvalidInputError("a call has one authorization metadata entry")
    if not values or not isinstance(values[0], str):
        return None
    scheme, _, credential = values[0].partition(" ")
    return credential.strip() if scheme.lower() == "bearer" else None


def peer_address(context: Any) -> str | None:
    """The client's address as the audit log records it (``ipv4:1.2.3.4:5`` -> ``1.2.3.4``)."""
    peer = str(context.peer() or "")
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0][:100] or None
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]")[:100] or None
    return peer[:100] or None


class MethodNames(grpc.aio.ServerInterceptor):  # type: ignore[type-arg]
    """Serves every ``cronwheel.v1`` method with :data:`METHOD` set to its name (grpc.aio's
    servicer context does not say which method it serves)."""

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],  # type: ignore[type-arg]
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:  # type: ignore[type-arg]
        handler = await continuation(details)
        method = details.method
        if handler is None or handler.unary_unary is None or not method.startswith(PACKAGE):
            return handler
        serve = handler.unary_unary

        async def named(request: Any, context: Any) -> Any:
            if isinstance(request, Malformed):
                await context.abort(grpc.StatusCode.INVALID_ARGUMENT, request.detail)
            token, held = METHOD.set(method), REQUEST.set(request)
            try:
                return await serve(request, context)
            finally:
                REQUEST.reset(held)
                METHOD.reset(token)

        return grpc.unary_unary_rpc_method_handler(
            named, tolerant(handler.request_deserializer), handler.response_serializer
        )


@dataclass(frozen=True, slots=True)
class Malformed:
    """A request whose bytes are not a message of its type (bad UTF-8 in a string field ...)."""

    detail: str


def tolerant(deserialize: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    """``deserialize``, answering :class:`Malformed` where it raises: grpc.aio would answer the
    client's bad bytes as UNKNOWN, a server fault; the handler answers INVALID_ARGUMENT."""
    if deserialize is None:
        return None

    def parse(data: bytes) -> Any:
        try:
            return deserialize(data)
        except DecodeError as error:
            return Malformed(f"the request is not a valid message: {str(error).rpartition(': ')[2]}")

    return parse


def _refused_status(error: Exception) -> int | None:
    """The HTTP status REST answers ``error`` with, when REST audits that refusal."""
    if isinstance(error, UnauthenticatedError):
        return 401
    if isinstance(error, ForbiddenError):
        return 403
    if isinstance(error, HiddenError):
        return 404
    return None


class Call:
    """One call of a method: ``async with Call(services, context) as call`` admits it (the
    failed-authentication bucket, authentication, the caller's rate: ``call.caller``,
    ``call.actor``) and answers whatever it raises as a gRPC status."""

    caller: Caller
    actor: Actor

    def __init__(self, services: ApiServices, context: Any) -> None:
        self.services = services
        self.context = context
        self.address = peer_address(context)
        self.known: Caller | None = None  # the caller, once authenticated (for the audit log)

    async def __aenter__(self) -> Call:
        services, limits = self.services, self.services.limits
        try:
            caller = await authenticate(services, bearer(self.context), self.address)
        except Exception as error:
            await self._abort(error)
        self.caller = self.known = caller
        self.actor = Actor.of(caller, self.address)
        try:
            services.rate_limiter.admit(caller_key(caller, self.address), limits)
        except Exception as error:
            await self._abort(error)
        await self._check_storable()
        return self

    async def _check_storable(self) -> None:
        request = REQUEST.get()
        found = None if request is None else unstorable_path(to_dict(request))
        if found is not None:
            path, is_key = found
            await self._abort(unstorable([entry("body", rest_path(path), is_key)]))

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if error is not None and isinstance(error, Exception) and not _is_abort(error):
            await self._abort(error)

    async def _abort(self, error: Exception) -> None:
        status = _refused_status(error)
        if status is not None:
            what = f"gRPC {METHOD.get()}"
            await record_refusal(self.services, self.known, self.address, what, status, str(error))
        answer = grpc_status(error)
        await self.context.abort(answer.code, answer.details, answer.trailing_metadata)


def _is_abort(error: Exception) -> bool:
    """Whether ``error`` is grpc.aio's own signal that the call was already answered."""
    return isinstance(error, grpc.aio.AbortError)


def rest_path(path: tuple[str | int, ...]) -> tuple[str | int, ...]:
    """A request field's path as REST names it: a job's fields without the request's ``job``
    wrapper, a target's without its ``oneof`` kind (``job.target.http.url`` -> ``target.url``)."""
    if len(path) > 1 and path[0] == "job":
        path = path[1:]
    if len(path) > 2 and path[0] == "target":
        path = ("target", *path[2:])
    return path
