"""``X-Content-Type-Options: nosniff`` on every answer of the API app: routes, problems, the
dashboard, the docs, the probes, 404s, the refusals of middlewares before routing and the 500 of
an error nothing handled. A browser then takes every body for the type it is declared as (a
problem is never run as a script, a JSON answer never rendered as HTML).

The app (:func:`cronwheel.api.app.create_app`) puts it around its whole middleware stack, outside
Starlette's own error middleware (which answers 500s), so that no answer is made around it."""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

HEADER = (b"x-content-type-options", b"nosniff")


class NoSniff:
    """ASGI middleware: every HTTP response start gets :data:`HEADER` (once: one already set is
    replaced)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = {**message, "headers": with_nosniff(message.get("headers", []))}
            await send(message)

        await self.app(scope, receive, sending)


def with_nosniff(headers: list[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``headers`` with :data:`HEADER` as their only ``X-Content-Type-Options``."""
    return [(name, value) for name, value in headers if name.lower() != HEADER[0]] + [HEADER]
