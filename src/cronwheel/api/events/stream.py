"""The answer of ``GET /v1/events``: a ``text/event-stream`` fed by one :class:`Subscription`.

It writes each change as it comes, a comment after the hub's ``heartbeat_s`` of silence (15 s: so
that proxies and the client know the connection lives), and ends after its ``lifetime_s`` (5
minutes: the client reconnects after the ``retry`` the stream opened with, and is authenticated
again, so a revoked token loses its stream within that time). It listens for the client's
disconnect beside writing, so a closed tab frees the stream's place at once, not at the next
write. Its place among the hub's streams is freed however it ends.
"""

from __future__ import annotations

import asyncio
import contextlib

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from cronwheel.api.events.hub import RETRY_MS, EventHub, Subscription
from cronwheel.api.events.topics import HEARTBEAT, frame, opening
from cronwheel.clock import Monotonic

MEDIA_TYPE = "text/event-stream"
HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}  # nginx: pass each event on


class EventStream(Response):
    media_type = MEDIA_TYPE

    def __init__(self, hub: EventHub, subscription: Subscription, ticks: Monotonic) -> None:
        super().__init__(headers=HEADERS, media_type=MEDIA_TYPE)
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]  # endless
        self.hub, self.subscription, self.ticks = hub, subscription, ticks
        self.heartbeat_s, self.lifetime_s = hub.heartbeat_s, hub.lifetime_s

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            writing = asyncio.ensure_future(self._write(send))
            leaving = asyncio.ensure_future(_disconnected(receive))
            done, pending = await asyncio.wait({writing, leaving}, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)
            if writing in done:
                with contextlib.suppress(OSError):  # the client left while a write was under way
                    writing.result()
        finally:
            await self.hub.close(self.subscription)

    async def _write(self, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        await send({"type": "http.response.body", "body": opening(RETRY_MS), "more_body": True})
        ends = self.ticks.monotonic() + self.lifetime_s
        while (left := ends - self.ticks.monotonic()) > 0:
            change = await self.subscription.next(min(self.heartbeat_s, left))
            if change is not None:
                await send({"type": "http.response.body", "body": frame(change), "more_body": True})
            elif ends - self.ticks.monotonic() > 0:
                await send({"type": "http.response.body", "body": HEARTBEAT, "more_body": True})
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def _disconnected(receive: Receive) -> None:
    """Return when the client has gone (``http.disconnect``)."""
    while (await receive())["type"] != "http.disconnect":
        pass
