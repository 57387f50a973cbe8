"""Log lines are logfmt facts with stable keys."""

from __future__ import annotations

import logging

from cronwheel.logs import LogfmtFormatter


def render(message: str, **extra: object) -> str:
    record = logging.makeLogRecord({"name": "cronwheel.test", "levelname": "INFO", "msg": message, **extra})
    return LogfmtFormatter().format(record)


def test_keys_and_quoting() -> None:
    line = render("fired", action="fire", job_id="j1", run_id="r1", lateness_ms=1.5, note='a "b" c')
    assert (
        " level=info logger=cronwheel.test msg=fired action=fire job_id=j1 run_id=r1 lateness_ms=1.5 " in line
    )
    assert line.endswith('note="a \\"b\\" c"')
    assert line.startswith("ts=")


def test_none_values_and_uvicorn_color_are_left_out() -> None:
    line = render("x", state=None, color_message="\x1b[1mx")
    assert "state=" not in line
    assert "color_message" not in line
