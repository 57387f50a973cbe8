"""Who is calling a gRPC method, and how its failure is answered.

Every method opens a :class:`Call`: it reads ``authorization: Bearer <token>`` from the call's
metadata and authenticates it exactly as REST does (:func:`cronwheel.api.auth.authenticate`: the
store's API tokens, then OIDC), so the same tokens, scopes and team walls hold. Any exception
inside the call is answered once, by :mod:`cronwheel.grpc_api.errors`, with a status code and
``google.rpc`` details.
"""

from __future__ import annotations

from types import TracebackType
from typing import Any

import grpc

from cronwheel.api.auth import authenticate
from cronwheel.api.services import ApiServices
from cronwheel.audit import Actor
from cronwheel.grpc_api.errors import grpc_status
from cronwheel.identity import Caller


def bearer(context: Any) -> str | None:
    """The credential of ``authorization: Bearer <credential>`` in the call's metadata."""
    for key, value in context.invocation_metadata() or ():
        if key == "authorization" and isinstance(value, str):
            scheme, _, credential = value.partition(" ")
            return credential.strip() if scheme.lower() == "bearer" else None
    return None


def peer_address(context: Any) -> str | None:
    """The client's address as the audit log records it (``ipv4:1.2.3.4:5`` -> ``1.2.3.4``)."""
    peer = str(context.peer() or "")
    kind, _, rest = peer.partition(":")
    if kind == "ipv4":
        return rest.rpartition(":")[0][:100] or None
    if kind == "ipv6":
        return rest.rpartition(":")[0].strip("[]")[:100] or None
    return peer[:100] or None


class Call:
    """One call of a method: ``async with Call(services, context) as call`` authenticates it
    (``call.caller``, ``call.actor``) and answers whatever it raises as a gRPC status."""

    caller: Caller
    actor: Actor

    def __init__(self, services: ApiServices, context: Any) -> None:
        self.services = services
        self.context = context

    async def __aenter__(self) -> Call:
        try:
            self.caller = await authenticate(self.services, bearer(self.context))
        except Exception as error:
            await self._abort(error)
        self.actor = Actor.of(self.caller, peer_address(self.context))
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if error is not None and isinstance(error, Exception) and not _is_abort(error):
            await self._abort(error)

    async def _abort(self, error: Exception) -> None:
        status = grpc_status(error)
        await self.context.abort(status.code, status.details, status.trailing_metadata)


def _is_abort(error: Exception) -> bool:
    """Whether ``error`` is grpc.aio's own signal that the call was already answered."""
    return isinstance(error, grpc.aio.AbortError)
