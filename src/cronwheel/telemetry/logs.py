"""Logs are facts: one line per event with stable keys, as logfmt (the default) or JSON.

Keys used across cronwheel: ``action`` (what happened: fire, skip, start, finish, requeue, ...),
``job_id``, ``run_id``, ``attempt``, ``node``, ``outcome``, ``state``, ``lateness_ms``,
``trace_id`` (a run's trace, when tracing is on). Every line starts with ``ts``, ``level``,
``logger`` and ``msg``; an exception is ``error`` (its traceback). Never log payloads, headers,
environment values or URLs with credentials: they may carry secrets.
"""

from __future__ import annotations

import json
import logging
import math
import re
import sys
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, Literal

LogFormat = Literal["logfmt", "json"]
FORMATS: tuple[LogFormat, ...] = ("logfmt", "json")

_STANDARD = frozenset(logging.makeLogRecord({}).__dict__) | {
    "message",
    "asctime",
    "taskName",
    "color_message",
}


def _facts(record: logging.LogRecord) -> Iterator[tuple[str, Any]]:
    """The record's own keys (``extra=``), in order, without the ones that are None."""
    for key, value in record.__dict__.items():
        if key not in _STANDARD and value is not None:
            yield key, value


def _stamp(record: logging.LogRecord) -> str:
    """``2026-12-06T21:56:38.123+00:00``: the second's text is made once per second."""
    global _second  # noqa: PLW0603 - one tuple, swapped whole: threads see an old or a new one
    second = int(record.created)
    known, text = _second
    if second != known:
        text = datetime.fromtimestamp(second, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        _second = (second, text)
    return f"{text}.{int((record.created - second) * 1000):03d}+00:00"


_second: tuple[int | None, str] = (None, "")  # the last second stamped, and its text


class LogfmtFormatter(logging.Formatter):
    """``ts=... level=info logger=cronwheel.scheduler msg="fired" action=fire job_id=...``"""

    def format(self, record: logging.LogRecord) -> str:
        parts = [f"ts={_stamp(record)}", f"level={record.levelname.lower()}", f"logger={record.name}"]
        parts.append(f"msg={_quote(record.getMessage())}")
        parts += [f"{key}={_quote(str(value))}" for key, value in _facts(record)]
        if record.exc_info:
            parts.append(f"error={_quote(self.formatException(record.exc_info))}")
        return " ".join(parts)


class JsonFormatter(logging.Formatter):
    """``{"ts": "...", "level": "info", "logger": "cronwheel.scheduler", "msg": "fired",
    "action": "fire", ...}``: one JSON object per line, the keys of :class:`LogfmtFormatter`.
    Numbers, booleans, strings, lists and objects stay themselves; anything else (a datetime,
    a path, a non-finite float) is its text. The four first keys are never overwritten by a
    record's own; an exception is ``error`` (``exception`` when the record has an ``error``)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "ts": _stamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key, value in _facts(record):
            line.setdefault(key, _native(value))
        if record.exc_info:
            line["exception" if "error" in line else "error"] = self.formatException(record.exc_info)
        return json.dumps(line, allow_nan=False)


def _native(value: Any) -> Any:
    """``value`` as JSON can hold it: its text unless it is a JSON value itself."""
    if isinstance(value, str | bool | int) or value is None:
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, list | tuple):
        return [_native(item) for item in value]
    if isinstance(value, dict):
        return {str(key): _native(item) for key, item in value.items()}
    return str(value)


def _quote(text: str) -> str:
    if text and _PLAIN.fullmatch(text):
        return text
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


_PLAIN = re.compile(r'[^ "=\n\t]+')  # a value logfmt writes as it is


def formatter(log_format: LogFormat = "logfmt") -> logging.Formatter:
    if log_format == "json":
        return JsonFormatter()
    return LogfmtFormatter()


def configure(level: str = "INFO", log_format: LogFormat = "logfmt") -> None:
    """Log at ``level`` to stderr in ``log_format``. A record is not given what no line shows
    (the caller's file and line, the thread's and process' names): looking them up is most of
    what a record costs, and a worker writes one per attempt."""
    logging.logThreads = logging.logProcesses = logging.logMultiprocessing = False
    logging._srcfile = None  # the logging HOWTO's optimisation: no frame walk per record
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(formatter(log_format))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    logging.getLogger("uvicorn.access").setLevel("WARNING")
    for noisy in ("aiosqlite", "sqlalchemy.engine", "alembic"):  # SQL parameters may hold secrets
        logging.getLogger(noisy).setLevel(max(logging.WARNING, root.level))
