"""Celery beat schedules from a config module (read with ast, never run) and from YAML."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from cronwheel.importers import celery
from cronwheel.importers.report import UnreadableInputError

from .support import OPTIONS, fixture, job, note, notes

EMPTY: dict[str, Any] = {"args": [], "kwargs": {}}


def test_beat_schedule_module() -> None:
    result = celery.convert(fixture("celeryconfig.py"), OPTIONS)
    assert [j["name"] for j in result.jobs] == [
        "add-every-30-seconds", "weekly-report", "first-monday-invoices", "cleanup",
    ]  # fmt: skip
    assert job(result, "add-every-30-seconds") == {
        "name": "add-every-30-seconds",
        "description": "Celery beat entry 'add-every-30-seconds': task proj.tasks.add",
        "schedule": "@every 30s",
        "timezone": "Europe/London",
        "target": {"type": "python", "function": "proj.tasks:add"},
        "payload": {"args": [16, 16], "kwargs": {}},
        "timeout_s": 86400.0,
        "misfire": {"policy": "run_once"},
        "labels": {"imported-from": "celery"},
    }
    weekly = job(result, "weekly-report")
    assert (weekly["schedule"], weekly["misfire"]) == ("30 7 * * 1", {"policy": "skip", "grace_s": 3600.0})
    invoices = job(result, "first-monday-invoices")
    assert invoices["schedule"] == "0 6 * * mon#1"  # Celery: day 1-7 AND Monday
    assert invoices["payload"] == {"args": [], "kwargs": {"dry_run": False}}
    assert job(result, "cleanup")["schedule"] == "@every 1h30m"


def test_beat_schedule_report() -> None:
    result = celery.convert(fixture("celeryconfig.py"), OPTIONS)
    entry = "beat_schedule[{!r}]".format
    assert notes(result) == [
        ("file", None, "timeout"),
        (entry("add-every-30-seconds"), "add-every-30-seconds", "schedule"),
        (entry("add-every-30-seconds"), "add-every-30-seconds", "target"),
        (entry("add-every-30-seconds"), "add-every-30-seconds", "misfire"),
        (entry("weekly-report"), "weekly-report", "target"),
        (entry("weekly-report"), "weekly-report", "misfire"),
        (entry("weekly-report"), "weekly-report", "dropped"),
        (entry("first-monday-invoices"), "first-monday-invoices", "schedule"),
        (entry("first-monday-invoices"), "first-monday-invoices", "target"),
        (entry("first-monday-invoices"), "first-monday-invoices", "misfire"),
        (entry("cleanup"), "cleanup", "schedule"),
        (entry("cleanup"), "cleanup", "target"),
        (entry("cleanup"), "cleanup", "misfire"),
        (entry("water-at-sunrise"), None, "skipped"),
        (entry("dynamic"), None, "skipped"),
        (entry("ping"), None, "skipped"),
        (entry("odd-days"), None, "skipped"),
    ]
    skipped = [n.message for n in result.notes if n.kind.value == "skipped"]
    assert skipped == [
        "not imported: schedule solar(...) has no cronwheel equivalent",
        "not imported: compute_schedule() cannot be read without running the module",
        "not imported: task 'ping' is not a dotted module path: give the job a target by hand",
        "not imported: day_of_month '1,15' and day_of_week 'fri' must both match in Celery; "
        "cron fires on a day matching either, and has no spelling for both",
    ]
    assert "(payload, ctx)" in note(result, "weekly-report", "target")
    assert note(result, "weekly-report", "dropped").startswith("options.queue")


def test_beat_schedule_data_form() -> None:
    result = celery.convert(fixture("celery_beat.yaml"), OPTIONS, python=False)
    assert [(j["name"], j["schedule"], j["timezone"]) for j in result.jobs] == [
        ("sync-inventory", "*/30 8-18 * * mon-fri", "America/New_York"),
        ("heartbeat", "@every 10s", "America/New_York"),
    ]
    assert all(j["payload"] == EMPTY for j in result.jobs)


def test_module_is_never_run(tmp_path: Path) -> None:
    marker = tmp_path / "ran"
    text = f"open({str(marker)!r}, 'w')\nbeat_schedule = {{'x': {{'task': 'a.b', 'schedule': open('x')}}}}\n"
    result = celery.convert(text, OPTIONS)
    assert not marker.exists()
    assert result.jobs == []
    assert "open('x') cannot be read without running the module" in result.notes[-1].message


@pytest.mark.parametrize(
    ("text", "python", "message"),
    [
        ("beat_schedule = {", True, "not valid Python"),
        ("broker_url = 'redis://'\n", True, "no beat_schedule"),
        ("timezone: UTC\n", False, "expected a mapping with beat_schedule"),
        ("beat: [", False, "not valid JSON/YAML"),
    ],
)
def test_unreadable_input(text: str, python: bool, message: str) -> None:
    with pytest.raises(UnreadableInputError, match=message):
        celery.convert(text, OPTIONS, python=python)
