"""The HTTP endpoint of a node that serves no API (a scheduler, a worker): ``GET /metrics`` and
``GET /healthz``, nothing else.

Fire lateness is measured where runs are fired (schedulers) and start lateness where they start
(workers): each process's registry (:data:`cronwheel.telemetry.metrics.REGISTRY`) holds only its own
figures, so every process must serve them. A node with the ``api`` role serves the same two paths
on its API port instead. A bare ASGI callable rather than a web framework: two read-only paths
need no routing, validation or OpenAPI.

The same defences as the API's (docs/security.md): a request for a host the node does not serve is
refused (421; ``/healthz`` aside, as on the API), and when the operator protects metrics
(``--protect-metrics``) ``/metrics`` needs a token of every team with the ``read`` scope (401
without a valid one, 403 for another).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST

from cronwheel.api.callers.access import AccessPolicy
from cronwheel.api.guards.host import ANY_HOST, host_allowed
from cronwheel.auth.identity import Caller, Scope
from cronwheel.cluster import gauges as metrics_live
from cronwheel.errors import UnauthenticatedError

AsgiScope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_HEALTHY = json.dumps({"status": "ok"}).encode()
_TEXT = "text/plain; charset=utf-8"
Authenticate = Callable[[str], Awaitable[Caller | None]]


class Endpoint:
    """``/metrics``: the Prometheus text format; ``/healthz``: the process is up (no backend is
    consulted, as on the API); any other path 404, any method but GET and HEAD 405. ``policy``
    says which hosts are served and whether metrics need a token, which ``authenticate`` judges
    (None for a credential it does not know, UnauthenticatedError for a bad one)."""

    def __init__(self, policy: AccessPolicy | None = None, authenticate: Authenticate | None = None) -> None:
        self.policy = policy or AccessPolicy()
        self.authenticate = authenticate

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        headers = {
            name.decode("latin-1").lower(): value.decode("latin-1") for name, value in scope["headers"]
        }
        refused = await self._refusal(scope["path"], headers)
        status, content_type, body = refused or await _answer(scope["method"], scope["path"])
        extra = [(b"www-authenticate", b'Bearer realm="cronwheel"')] if status == 401 else []
        headers_out = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
        await send({"type": "http.response.start", "status": status, "headers": headers_out + extra})
        await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})

    async def _refusal(self, path: str, headers: dict[str, str]) -> tuple[int, str, bytes] | None:
        host = headers.get("host")
        if host is not None and path not in ANY_HOST and not host_allowed(host, self.policy.allowed_hosts):
            return (
                421,
                _TEXT,
                b"misdirected request: this node does not serve that host (see --allowed-host)\n",
            )
        if path != "/metrics" or not self.policy.protect_metrics:
            return None
        scheme, _, credential = headers.get("authorization", "").partition(" ")
        caller = None
        if scheme.lower() == "bearer" and credential.strip() and self.authenticate is not None:
            try:
                caller = await self.authenticate(credential.strip())
            except UnauthenticatedError:
                caller = None
        if caller is None:
            return 401, _TEXT, b"unauthenticated: /metrics needs a token (Authorization: Bearer <token>)\n"
        if caller.teams is not None or not caller.has(Scope.READ):
            return 403, _TEXT, b"forbidden: /metrics needs a token of every team with the 'read' scope\n"
        return None


app = Endpoint()
"""The endpoint as a node without an operator's settings serves it."""


async def _answer(method: str, path: str) -> tuple[int, str, bytes]:
    if path not in ("/metrics", "/healthz"):
        return 404, _TEXT, b"not found: this endpoint serves /metrics and /healthz\n"
    if method not in ("GET", "HEAD"):
        return 405, _TEXT, b"method not allowed\n"
    if path == "/healthz":
        return 200, "application/json", _HEALTHY
    return 200, CONTENT_TYPE_LATEST, await metrics_live.scrape()
