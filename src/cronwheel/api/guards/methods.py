"""Which methods a path answers, for ``Allow`` (RFC 9110 section 10.2.1) and ``OPTIONS``.

Starlette answers a method a path does not have with 405 and an ``Allow`` naming the methods of
the first route whose path matched, so ``PUT /v1/jobs`` said ``Allow: POST`` although the path
also answers GET. The paths here have several routes (one per method, and each job route twice,
see :mod:`cronwheel.api.addressing`): ``Allow`` must name the methods of all of them. ``OPTIONS``
is answered the same way (204 with ``Allow``, section 9.3.7), never with a body and never with
CORS headers: a browser still refuses a cross-site request that needs a preflight.
"""

from __future__ import annotations

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Match

_METHODS = ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE")


def allowed_methods(request: Request) -> list[str]:
    """The methods some route answers at the request's path, with OPTIONS; empty when no route's
    path matches. Each method is asked of the router as it routes (``BaseRoute.matches``), so
    that included routers and both addresses of a job are counted."""
    routes = request.app.router.routes
    methods = {
        method
        for method in _METHODS
        if any(route.matches({**request.scope, "method": method})[0] is Match.FULL for route in routes)
    }
    return sorted(methods | {"OPTIONS"}) if methods else []


def options_response(request: Request) -> Response | None:
    """The answer to ``OPTIONS`` on a path some route has (None for another method or path)."""
    if request.method != "OPTIONS":
        return None
    allowed = allowed_methods(request)
    return Response(status_code=204, headers={"Allow": ", ".join(allowed)}) if allowed else None
