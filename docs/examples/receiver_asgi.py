"""A webhook receiver for cronwheel as a plain ASGI application (no framework).

Run it:  WEBHOOK_SECRET=whsec_... uvicorn --factory docs.examples.receiver_asgi:make_app --port 8001

The same answers as receiver_wsgi.py. The work runs in a thread (``asyncio.to_thread``): the
receiver's checks are quick, the work may not be.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from cronwheel.receiver import (
    Deduplicator,
    Duplicate,
    InvalidSignature,
    MemoryDeduplicator,
    Receiver,
    StaleTimestamp,
    asgi_headers,
)

MAX_BODY = 1 << 20

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]


def process(payload: Any) -> None:
    """The work a delivery asks for (replace with yours)."""
    print("processing", payload)


async def _body(receive: Receive) -> bytes | None:
    """The request body (None: larger than MAX_BODY)."""
    chunks, size = [], 0
    while True:
        message = await receive()
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            return None
        chunks.append(chunk)
        if not message.get("more_body"):
            return b"".join(chunks)


def make_app(
    secret: str | None = None,
    deduplicator: Deduplicator | None = None,
    work: Callable[[Any], None] = process,
) -> Callable[[Scope, Receive, Send], Awaitable[None]]:
    receiver = Receiver(secret or os.environ["WEBHOOK_SECRET"], deduplicator or MemoryDeduplicator())

    async def handle(headers: dict[str, str], body: bytes | None) -> tuple[int, str]:
        if body is None:
            return 413, "too large"
        try:
            with receiver.receive(headers, body) as delivery:
                await asyncio.to_thread(work, json.loads(delivery.body) if delivery.body else None)
        except Duplicate:
            return 200, "already processed"
        except InvalidSignature:
            return 401, "bad signature"
        except StaleTimestamp:
            return 400, "stale timestamp"
        except Exception:  # the work failed: the id was released, cronwheel retries
            return 500, "failed"
        return 200, "processed"

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        status, text = await handle(asgi_headers(scope), await _body(receive))
        headers = [(b"content-type", b"text/plain; charset=utf-8")]
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": text.encode()})

    return app
