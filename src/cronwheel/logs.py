"""Logs are facts: one line per event, ``key=value`` pairs with stable keys.

Keys used across cronwheel: ``action`` (what happened: fire, skip, start, finish, requeue, ...),
``job_id``, ``run_id``, ``attempt``, ``node``, ``outcome``, ``state``, ``lateness_ms``. Never log
payloads, headers, environment values or URLs with credentials: they may carry secrets.
"""

from __future__ import annotations

import logging
import sys
from datetime import UTC, datetime

_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {
    "message",
    "asctime",
    "taskName",
    "color_message",
}


class LogfmtFormatter(logging.Formatter):
    """``ts=... level=info logger=cronwheel.scheduler msg="fired" action=fire job_id=...``"""

    def format(self, record: logging.LogRecord) -> str:
        stamp = datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")
        parts = [f"ts={stamp}", f"level={record.levelname.lower()}", f"logger={record.name}"]
        parts.append(f"msg={_quote(record.getMessage())}")
        for key, value in record.__dict__.items():
            if key not in _STANDARD and value is not None:
                parts.append(f"{key}={_quote(str(value))}")
        if record.exc_info:
            parts.append(f"error={_quote(self.formatException(record.exc_info))}")
        return " ".join(parts)


def _quote(text: str) -> str:
    if text and not any(c in text for c in ' "=\n\t'):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def configure(level: str = "INFO") -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(LogfmtFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("uvicorn.access").setLevel("WARNING")
    for noisy in ("aiosqlite", "sqlalchemy.engine", "alembic"):  # SQL parameters may hold secrets
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
