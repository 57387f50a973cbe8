"""APScheduler modules read with ast: triggers, weekday numbering, defaults and policies."""

from __future__ import annotations

from typing import Any

import pytest

from cronwheel.importers import apscheduler
from cronwheel.importers.report import ImportResult, UnreadableInputError

from .support import OPTIONS, fixture, job, note, notes

EMPTY: dict[str, Any] = {"args": [], "kwargs": {}}


def convert(text: str) -> ImportResult:
    return apscheduler.convert(text, OPTIONS, module="shop.schedule")


def test_apscheduler_jobs() -> None:
    result = convert(fixture("aps_jobs.py"))
    assert [j["name"] for j in result.jobs] == [
        "purge-sessions", "rebuild_index", "quarterly", "grand-opening", "weekend-index", "weekend_sync",
        "month_close",
    ]  # fmt: skip
    assert job(result, "purge-sessions") == {
        "name": "purge-sessions",
        "description": "APScheduler job 'purge-sessions': shop.maintenance:purge_sessions",
        "schedule": "0 3 * * MON-FRI",  # day_of_week 0-4: Monday to Friday, not Sunday to Thursday
        "timezone": "Europe/Berlin",
        "target": {"type": "python", "function": "shop.maintenance:purge_sessions"},
        "payload": EMPTY,
        "timeout_s": 86400.0,
        "misfire": {"policy": "skip", "grace_s": 30.0},  # from the scheduler's job_defaults
        "overlap": "forbid",
        "labels": {"imported-from": "apscheduler"},
    }
    schedules = {j["name"]: (j["schedule"], j["timezone"]) for j in result.jobs}
    assert schedules == {
        "purge-sessions": ("0 3 * * MON-FRI", "Europe/Berlin"),
        "rebuild_index": ("@every 1h30m from 2027-01-01T00:00:00+01:00", "Europe/Berlin"),
        "quarterly": ("0 6 1 1,4,7,10 *", "Europe/Berlin"),
        "grand-opening": ("@at 2027-03-01T09:00:00+01:00", "Europe/Berlin"),
        "weekend-index": ("*/5 * * * SUN", "UTC"),  # from_crontab keeps APScheduler's 6 = Sunday
        "weekend_sync": ("*/20 * * * SAT,SUN", "Europe/Berlin"),
        "month_close": ("0 18 * * FRIL", "Europe/Berlin"),
    }
    assert job(result, "quarterly")["payload"] == {"args": ["pdf"], "kwargs": {}}
    assert job(result, "weekend-index")["misfire"] == {"policy": "catch_up"}
    assert job(result, "weekend_sync")["overlap"] == "allow"
    assert job(result, "weekend_sync")["target"]["function"] == "shop.schedule:weekend_sync"
    assert job(result, "month_close")["misfire"] == {"policy": "skip", "grace_s": 600.0}


def test_apscheduler_report() -> None:
    result = convert(fixture("aps_jobs.py"))
    assert notes(result) == [
        ("file", None, "timeout"),
        ("line 15: add_job", "purge-sessions", "schedule"),
        ("line 15: add_job", "purge-sessions", "target"),
        ("line 16: add_job", "rebuild_index", "target"),
        ("line 17: add_job", "quarterly", "target"),
        ("line 18: add_job", "grand-opening", "renamed"),
        ("line 18: add_job", "grand-opening", "target"),
        ("line 19: add_job", None, "skipped"),
        ("line 20: add_job", "weekend-index", "schedule"),
        ("line 20: add_job", "weekend-index", "target"),
        ("line 20: add_job", "weekend-index", "misfire"),
        ("line 27: add_job", None, "skipped"),
        ("line 30: @scheduled_job weekend_sync", "weekend_sync", "target"),
        ("line 30: @scheduled_job weekend_sync", "weekend_sync", "schedule"),
        ("line 30: @scheduled_job weekend_sync", "weekend_sync", "overlap"),
        ("line 35: @scheduled_job month_close", "month_close", "target"),
    ]
    assert note(result, "purge-sessions", "schedule") == (
        "day_of_week '0-4' counts from Monday = 0 in APScheduler, Sunday = 0 in cron: written 'MON-FRI'"
    )
    assert "written 'SUN'" in note(result, "weekend-index", "schedule")
    assert "cron has no week field" in result.notes[7].message
    assert "lambda" in result.notes[11].message
    assert note(result, "weekend_sync", "schedule") == (
        "jitter 20: jitter_s 20, an offset fixed per slot by the job id, where APScheduler draws a "
        "random one at each fire"
    )
    assert job(result, "weekend_sync")["jitter_s"] == 20.0


@pytest.mark.parametrize(
    ("jitter", "kept", "message"),
    [
        ("30", 30.0, "jitter_s 30"),
        ("300", None, "jitter 300: not shorter than the gap between two fires"),  # every 5 minutes
        ("-1", None, "jitter -1 is not a window of 0 to 86400 s"),
    ],
)
def test_apscheduler_jitter_becomes_a_window_that_fits_the_gaps(
    jitter: str, kept: float | None, message: str
) -> None:
    result = convert(
        f"s = BackgroundScheduler(timezone='UTC')\ns.add_job(f, 'cron', minute='*/5', jitter={jitter})\n"
    )
    [made] = result.jobs
    assert made.get("jitter_s") == kept
    assert any(message in each.message for each in result.notes), result.notes


@pytest.mark.parametrize(
    ("call", "schedule"),
    [
        ('s.add_job(f, "cron", hour=5)', "0 5 * * *"),  # below the hour: minimum; above: every
        ('s.add_job(f, "cron", day=1)', "0 0 1 * *"),
        ('s.add_job(f, "cron", minute="*/15")', "*/15 * * * *"),
        ('s.add_job(f, "cron", second=30)', "30 * * * * *"),
        ('s.add_job(f, "cron", day_of_week="*/2", hour=8)', "0 8 * * MON,WED,FRI,SUN"),
        ('s.add_job(f, "cron", day_of_week="5,6")', "0 0 * * SAT,SUN"),
        ('s.add_job(f, "cron", day="2nd tue")', "0 0 * * TUE#2"),
        ('s.add_job(f, "cron", day="last")', "0 0 L * *"),
        ('s.add_job(f, "interval", minutes=5)', "@every 5m"),
        ('s.add_job(f, "interval", weeks=1, seconds=1)', "@every 7d1s"),
        ('s.add_job(f, "date", run_date="2027-05-01T10:00:00+02:00")', "@at 2027-05-01T10:00:00+02:00"),
    ],
)
def test_triggers(call: str, schedule: str) -> None:
    result = convert(f"s = BackgroundScheduler(timezone='UTC')\n{call}\n")
    assert [j["schedule"] for j in result.jobs] == [schedule]


def test_both_day_fields_must_match() -> None:
    first = 's.add_job(f, "cron", day="1-7", day_of_week="fri")\n'
    result = convert(first + 's.add_job(g, "cron", day="10", day_of_week="fri")\n')
    assert [j["schedule"] for j in result.jobs] == ["0 0 * * FRI#1"]
    assert "must both match in APScheduler" in result.notes[-1].message


def test_no_zone_is_assumed_and_said() -> None:
    result = convert('s.add_job(f, "cron", hour=5)\n')
    assert result.jobs[0]["timezone"] == "UTC"
    assert notes(result)[0] == ("file", None, "timezone")


@pytest.mark.parametrize(("text", "message"), [("def (", "not valid Python"), ("x = 1\n", "no add_job")])
def test_unreadable_input(text: str, message: str) -> None:
    with pytest.raises(UnreadableInputError, match=message):
        convert(text)


def test_flask_apscheduler_jobs_list() -> None:
    text = """
JOBS = [
    {"id": "job1", "func": "shop.jobs:ping", "args": (1, 2), "trigger": "interval", "seconds": 10},
    {"id": "job2", "func": "shop.jobs:tidy", "trigger": "cron", "day_of_week": "6", "hour": 4},
    {"id": "job3", "func": helper, "trigger": "cron", "hour": 4},
]
SCHEDULER_TIMEZONE = "UTC"
"""
    result = convert(text)
    assert [(j["name"], j["schedule"], j["target"]["function"]) for j in result.jobs] == [
        ("job1", "@every 10s", "shop.jobs:ping"),
        ("job2", "0 4 * * SUN", "shop.jobs:tidy"),
    ]
    assert job(result, "job1")["payload"] == {"args": [1, 2], "kwargs": {}}
    assert notes(result)[-1] == ("JOBS[2]", None, "skipped")
