"""The HTTP endpoint of a node that serves no API (a scheduler, a worker): ``GET /metrics`` and
``GET /healthz``, nothing else.

Fire lateness is measured where runs are fired (schedulers) and start lateness where they start
(workers): each process's registry (:data:`cronwheel.metrics.REGISTRY`) holds only its own
figures, so every process must serve them. A node with the ``api`` role serves the same two paths
on its API port instead. A bare ASGI callable rather than a web framework: two read-only paths
need no routing, validation or OpenAPI.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from cronwheel import metrics

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]

_HEALTHY = json.dumps({"status": "ok"}).encode()


async def app(scope: Scope, receive: Receive, send: Send) -> None:
    """``/metrics``: the Prometheus text format; ``/healthz``: the process is up (no backend is
    consulted, as on the API); any other path 404, any method but GET and HEAD 405."""
    if scope["type"] != "http":
        return
    status, content_type, body = _answer(scope["method"], scope["path"])
    headers = [(b"content-type", content_type.encode()), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": b"" if scope["method"] == "HEAD" else body})


def _answer(method: str, path: str) -> tuple[int, str, bytes]:
    if path not in ("/metrics", "/healthz"):
        return 404, "text/plain; charset=utf-8", b"not found: this endpoint serves /metrics and /healthz\n"
    if method not in ("GET", "HEAD"):
        return 405, "text/plain; charset=utf-8", b"method not allowed\n"
    if path == "/healthz":
        return 200, "application/json", _HEALTHY
    return 200, CONTENT_TYPE_LATEST, generate_latest(metrics.REGISTRY)
