"""Log lines are facts with stable keys: logfmt, or one JSON object per line."""

from __future__ import annotations

import json
import logging
import math
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from cronwheel.cli import cli
from cronwheel.model import RunState
from cronwheel.telemetry.logs import JsonFormatter, LogfmtFormatter, configure


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


def render_json(message: str, **extra: object) -> dict[str, Any]:
    record = logging.makeLogRecord({"name": "cronwheel.test", "levelname": "INFO", "msg": message, **extra})
    line = JsonFormatter().format(record)
    assert "\n" not in line
    parsed: dict[str, Any] = json.loads(line)
    return parsed


def test_json_line_has_the_stable_keys() -> None:
    fact = render_json(
        "fired", action="fire", job_id="j1", run_id="r1", attempt=2, node="n1", lateness_ms=1.5
    )
    assert list(fact)[:4] == ["ts", "level", "logger", "msg"]
    assert fact["level"] == "info"
    assert fact["logger"] == "cronwheel.test"
    assert fact["msg"] == "fired"
    assert datetime.fromisoformat(fact["ts"]).tzinfo is not None
    assert {k: fact[k] for k in ("action", "job_id", "run_id", "attempt", "node", "lateness_ms")} == {
        "action": "fire", "job_id": "j1", "run_id": "r1", "attempt": 2, "node": "n1", "lateness_ms": 1.5,
    }  # fmt: skip


def test_json_values_that_json_cannot_hold_are_text() -> None:
    slot = datetime(2026, 3, 2, 12, 0, tzinfo=UTC)
    fact = render_json(
        "x", slot=slot, path=Path("/tmp/x"), state=RunState.RUNNING, ratio=math.nan, ok=True,
        nested={"at": slot, 1: [slot, 2]}, gone=None,
    )  # fmt: skip
    assert fact["slot"] == str(slot)
    assert fact["path"] == "/tmp/x"
    assert fact["state"] == "RUNNING"
    assert fact["ratio"] == "nan"  # JSON has no NaN: a strict parser would refuse the line
    assert fact["ok"] is True
    assert fact["nested"] == {"at": str(slot), "1": [str(slot), 2]}
    assert "gone" not in fact


def test_json_keeps_its_own_keys_and_carries_exceptions() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        info = sys.exc_info()
    fact = render_json("failed", exc_info=info, ts="forged", level="forged")
    assert fact["level"] == "info"
    assert fact["ts"] != "forged"
    assert fact["error"].startswith("Traceback")
    assert "ValueError: boom" in fact["error"]
    both = render_json("failed", exc_info=info, error="store down")
    assert both["error"] == "store down"
    assert "ValueError: boom" in both["exception"]


def test_configure_installs_the_chosen_format() -> None:
    root = logging.getLogger()
    saved = root.handlers[:], root.level
    try:
        configure("INFO", "json")
        assert isinstance(root.handlers[0].formatter, JsonFormatter)
        configure("INFO")
        assert isinstance(root.handlers[0].formatter, LogfmtFormatter)
    finally:
        root.handlers[:], level = saved
        root.setLevel(level)


@pytest.mark.parametrize("command", ["server", "api", "scheduler", "worker"])
def test_a_bad_log_format_is_a_usage_error(command: str) -> None:
    result = CliRunner().invoke(cli, [command, "--log-format", "xml"])
    assert result.exit_code == 2
    assert "Invalid value for '--log-format'" in result.output
    assert "'logfmt'" in result.output
    assert "'json'" in result.output


def test_the_log_format_comes_from_the_environment_too() -> None:
    result = CliRunner().invoke(cli, ["worker"], env={"CRONWHEEL_LOG_FORMAT": "yaml"})
    assert result.exit_code == 2
    assert "Invalid value for '--log-format'" in result.output
