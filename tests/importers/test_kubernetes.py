"""Kubernetes CronJobs: zone, deadline, concurrency, suspend, containers; other kinds passed over."""

from __future__ import annotations

import pytest

from cronwheel.importers import kubernetes
from cronwheel.importers.report import UnreadableInputError

from .support import OPTIONS, fixture, job, note, notes

POD_BACKOFF = {"initial_delay_s": 10.0, "multiplier": 2.0, "max_delay_s": 360.0, "jitter": False}


def test_cronjobs_become_jobs() -> None:
    result = kubernetes.convert(fixture("cronjobs.yaml"), OPTIONS)
    assert [j["name"] for j in result.jobs] == ["nightly-report", "hello", "cache-warmer"]
    assert job(result, "nightly-report") == {
        "name": "nightly-report",
        "description": "Kubernetes CronJob analytics/nightly-report",
        "schedule": "30 1 * * *",
        "timezone": "America/New_York",
        "target": {
            "type": "command",
            "argv": ["/app/report", "--since", "24h"],
            "env": {"MODE": "full"},
            "cwd": "/app",
        },
        "misfire": {"policy": "skip", "grace_s": 300.0},
        "overlap": "forbid",
        "paused": True,  # apply leaves it, and says so; the report's action pauses
        "timeout_s": 1800.0,
        "retry": {"max_attempts": 3, **POD_BACKOFF},
        "labels": {"imported-from": "k8s"},
    }
    hello = job(result, "hello")
    assert (hello["timezone"], hello["misfire"], hello["overlap"]) == ("UTC", {"policy": "run_once"}, "allow")
    assert hello["retry"]["max_attempts"] == 7  # backoffLimit's default, 6
    warmer = job(result, "cache-warmer")
    assert (warmer["schedule"], warmer["timezone"]) == ("*/10 6-22 * * *", "Europe/Berlin")
    assert (warmer["overlap"], warmer["misfire"]) == ("replace", {"policy": "skip", "grace_s": 604800.0})
    assert "retry" not in warmer  # backoffLimit 0: one attempt, the default


def test_cronjobs_report() -> None:
    result = kubernetes.convert(fixture("cronjobs.yaml"), OPTIONS)
    report = "CronJob analytics/nightly-report"
    assert notes(result) == [
        ("Deployment dashboard", None, "skipped"),
        (report, "nightly-report", "dropped"),
        (report, "nightly-report", "target"),
        (report, "nightly-report", "dst"),
        (report, "nightly-report", "misfire"),
        (report, "nightly-report", "paused"),
        (report, "nightly-report", "retry"),
        (report, "nightly-report", "dropped"),
        ("CronJob hello", "hello", "timezone"),
        ("CronJob hello", "hello", "target"),
        ("CronJob hello", "hello", "misfire"),
        ("CronJob hello", "hello", "timeout"),
        ("CronJob hello", "hello", "retry"),
        ("CronJob cache-warmer", "cache-warmer", "timezone"),
        ("CronJob cache-warmer", "cache-warmer", "target"),
        ("CronJob cache-warmer", "cache-warmer", "dropped"),
        ("CronJob cache-warmer", "cache-warmer", "misfire"),
        ("CronJob cache-warmer", "cache-warmer", "timeout"),
        ("CronJob entrypoint-only", None, "skipped"),
    ]
    assert note(result, "nightly-report", "dst").startswith(
        "01:00-02:00 on 2027-11-07 happens twice in America/New_York: Kubernetes may run the job on both"
    )
    paused = next(n for n in result.notes if n.kind.value == "paused")
    assert paused.action == "cronwheel jobs pause ops/nightly-report"
    assert "DB_PASSWORD" in result.notes[1].message
    assert "only the latest of them" not in note(result, "nightly-report", "misfire")  # one slot a day
    assert "only the latest of them" in note(result, "cache-warmer", "misfire")  # every 10 minutes
    assert "capped at 7 days" in note(result, "cache-warmer", "misfire")
    assert "CRON_TZ=Europe/Berlin" in note(result, "cache-warmer", "timezone")
    assert "'sidecar'" in note(result, "cache-warmer", "dropped")
    assert "entrypoint" in result.notes[-1].message


def test_no_dst_note_for_wildcard_schedules() -> None:
    text = fixture("cronjobs.yaml").replace('"30 1 * * *"', '"*/30 * * * *"')
    result = kubernetes.convert(text, OPTIONS)
    assert ("CronJob analytics/nightly-report", "nightly-report", "dst") not in notes(result)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("kind: [unclosed", "not valid YAML"),
        ("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: web}\n", "no CronJob in the input"),
        ("- just\n- a list\n", "is not a mapping"),
        ("kind: CronJob\nmetadata: {name: x}\n", "a CronJob needs metadata.name and spec"),
    ],
)
def test_unreadable_input(text: str, message: str) -> None:
    with pytest.raises(UnreadableInputError, match=message):
        kubernetes.convert(text, OPTIONS)
