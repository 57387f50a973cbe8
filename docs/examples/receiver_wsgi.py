"""A webhook receiver for cronwheel as a plain WSGI application (standard library only).

Run it:  WEBHOOK_SECRET=whsec_... python docs/examples/receiver_wsgi.py   (listens on 127.0.0.1:8001)
or under any WSGI server:  gunicorn 'receiver_wsgi:make_app()'  (with a SqliteDeduplicator,
shared by the server's processes).

Answers: 200 processed; 200 already processed (a retry of a delivery that was done: the sender
stops retrying); 401 not signed with our secret; 400 stale timestamp; 500 processing failed (the id
is released, so cronwheel's retry is processed).
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable
from typing import Any

from cronwheel.receiver import (
    Deduplicator,
    Duplicate,
    InvalidSignature,
    MemoryDeduplicator,
    Receiver,
    StaleTimestamp,
    wsgi_headers,
)

MAX_BODY = 1 << 20

StartResponse = Callable[[str, list[tuple[str, str]]], Any]


def process(payload: Any) -> None:
    """The work a delivery asks for (replace with yours)."""
    print("processing", payload)


def make_app(
    secret: str | None = None,
    deduplicator: Deduplicator | None = None,
    work: Callable[[Any], None] = process,
) -> Callable[[dict[str, Any], StartResponse], Iterable[bytes]]:
    receiver = Receiver(secret or os.environ["WEBHOOK_SECRET"], deduplicator or MemoryDeduplicator())

    def app(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        def answer(status: str, text: str) -> list[bytes]:
            start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
            return [text.encode()]

        length = int(environ.get("CONTENT_LENGTH") or 0)
        if length > MAX_BODY:
            return answer("413 Content Too Large", "too large")
        body = environ["wsgi.input"].read(length) if length else b""  # the exact bytes: verify these
        try:
            with receiver.receive(wsgi_headers(environ), body) as delivery:
                work(json.loads(delivery.body) if delivery.body else None)
        except Duplicate:
            return answer("200 OK", "already processed")
        except InvalidSignature:
            return answer("401 Unauthorized", "bad signature")
        except StaleTimestamp:
            return answer("400 Bad Request", "stale timestamp")
        except Exception:  # the work failed: the id was released, cronwheel retries
            return answer("500 Internal Server Error", "failed")
        return answer("200 OK", "processed")

    return app


if __name__ == "__main__":
    from wsgiref.simple_server import make_server

    with make_server("127.0.0.1", 8001, make_app()) as server:
        server.serve_forever()
