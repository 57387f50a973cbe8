"""Counts every API request by method, route template and status
(``cronwheel_api_requests_total``) and times it (``cronwheel_api_request_duration_seconds``).

The route label is the matched route's path template (``/v1/jobs/{job_id}``), never the raw
path: a label per job id would grow without bound. The router leaves the matched route in the
ASGI scope (``scope["route"]``) with its template as declared, without the prefix the router was
included under (``/v1``); the prefix is what the raw path holds before the route's own part (the
template filled with the request's path parameters), and it must be one the app includes its
routers under. A request no route matched (404, a refusal before routing such as a wrong Host)
is labelled ``unmatched``; the method label is one of the HTTP methods the API knows, else
``other``. A pure ASGI middleware (no BaseHTTPMiddleware): streamed responses pass through
untouched, and the status is taken from the response's start message.
"""

from __future__ import annotations

import time
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from cronwheel.telemetry import metrics

UNMATCHED = "unmatched"
_METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


PREFIXES = ("", "/v1")  # what create_app includes its routers under


class RequestMetrics:
    def __init__(self, app: ASGIApp, prefixes: tuple[str, ...] = PREFIXES) -> None:
        self.app = app
        self.prefixes = prefixes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500  # the app raised before answering: the server answers 500

        async def sending(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, sending)
        finally:
            method = scope["method"] if scope["method"] in _METHODS else "other"
            route = route_template(scope, self.prefixes)
            metrics.API_REQUESTS.labels(method, route, str(status)).inc()
            metrics.API_LATENCY.labels(method, route).observe(time.perf_counter() - started)


def route_template(scope: Scope, prefixes: tuple[str, ...] = PREFIXES) -> str:
    """The full path template of the route that answered, or ``unmatched``."""
    route: Any = scope.get("route")
    template = getattr(route, "path_format", None) or getattr(route, "path", None)
    if not isinstance(template, str) or not template:
        return UNMATCHED
    params = scope.get("path_params") or {}
    try:
        own = template.format(**{name: str(value) for name, value in params.items()})
    except (KeyError, IndexError, ValueError):
        return UNMATCHED
    path = str(scope.get("path", ""))
    prefix = path[: len(path) - len(own)] if path.endswith(own) else None
    return prefix + template if prefix in prefixes else UNMATCHED
