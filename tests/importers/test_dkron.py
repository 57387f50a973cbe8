"""Dkron's job list: six-field cron, ~, @every, @at, shell/http/kafka executors, chains."""

from __future__ import annotations

import json

import pytest

from cronwheel.importers import dkron
from cronwheel.importers.report import UnreadableInputError

from .support import OPTIONS, fixture, job, note, notes

AT_ONCE = {"initial_delay_s": 1.0, "multiplier": 1.0, "max_delay_s": 1.0, "jitter": False}


def test_dkron_jobs() -> None:
    result = dkron.convert(fixture("dkron_jobs.json"), OPTIONS)
    assert [j["name"] for j in result.jobs] == ["db-backup", "ping-api", "rotate-logs", "launch"]
    assert job(result, "db-backup") == {
        "name": "db-backup",
        "description": "Nightly database backup",
        "schedule": "0 30 2 * * *",
        "timezone": "Europe/Madrid",
        "target": {
            "type": "command",
            "argv": ["/usr/local/bin/pg-backup", "--all"],
            "env": {"PGHOST": "db1", "PGPORT": "5432"},
        },
        "timeout_s": 7200.0,
        "overlap": "forbid",
        "retry": {
            "max_attempts": 3,
            "initial_delay_s": 1.0,
            "multiplier": 1.0,
            "max_delay_s": 1.0,
            "jitter": False,
        },
        "labels": {"imported-from": "dkron", "team": "platform"},
    }
    assert job(result, "ping-api") == {
        "name": "ping-api",
        "description": "Ping the public API",
        "schedule": "@every 1m30s",
        "timezone": "UTC",
        "target": {
            "type": "http",
            "url": "https://api.example.com/v1/ping",
            "method": "POST",
            "headers": {"Content-Type": "application/json", "X-Source": "dkron"},
            "expected_status": [200],
        },
        "payload": {"from": "dkron"},
        "timeout_s": 30.0,
        "overlap": "allow",
        "end_at": "2027-06-30T00:00:00Z",
        "labels": {"imported-from": "dkron"},
        "paused": True,
    }
    rotate = job(result, "rotate-logs")
    assert (rotate["schedule"], rotate["timezone"]) == ("0 H 1 * * *", "America/Chicago")
    assert rotate["target"]["argv"] == ["/bin/sh", "-c", "find /var/log/app -name '*.log' -mtime +7 -delete"]
    launch = job(result, "launch")
    assert launch["schedule"] == "@at 2027-01-15T09:00:00+01:00"
    assert launch["target"] == {"type": "kafka", "bootstrap_servers": ["kafka:9092"], "topic": "launch"}
    assert launch["payload"] == "go"


def test_dkron_report() -> None:
    result = dkron.convert(fixture("dkron_jobs.json"), OPTIONS)
    backup, ping, rotate = "job db-backup", "job ping-api", "job rotate logs"
    assert notes(result) == [
        (backup, "db-backup", "target"),
        (backup, "db-backup", "dst"),
        (backup, "db-backup", "retry"),
        (backup, "db-backup", "notification"),
        (backup, "db-backup", "dropped"),
        (backup, "db-backup", "dropped"),
        (backup, "db-backup", "dropped"),
        ("job db-backup-verify", None, "skipped"),
        (ping, "ping-api", "target"),
        (ping, "ping-api", "schedule"),
        (ping, "ping-api", "paused"),
        (rotate, "rotate-logs", "renamed"),
        (rotate, "rotate-logs", "schedule"),
        (rotate, "rotate-logs", "shell"),
        (rotate, "rotate-logs", "timeout"),
        (rotate, "rotate-logs", "target"),
        (rotate, "rotate-logs", "dst"),
        ("job launch", "launch", "target"),
    ]
    assert note(result, "rotate-logs", "schedule").startswith("'~' (hashed from the job's name by Dkron)")
    assert "another minute" in note(result, "rotate-logs", "schedule")
    assert (
        note(result, "rotate-logs", "renamed")
        == "'rotate logs' became 'rotate-logs' (made a valid cronwheel name)"
    )
    assert "02:00-03:00 on 2027-10-31 happens twice in Europe/Madrid" in note(result, "db-backup", "dst")
    mail = next(n for n in result.notes if n.kind.value == "notification")
    assert mail.action is not None
    assert mail.action.endswith("--job ops/db-backup")
    assert "platform@example.com" in mail.action
    assert "runs after job 'db-backup'" in result.notes[7].message


def test_go_durations_and_unknown_executors() -> None:
    shell = {"executor": "shell", "executor_config": {"command": "/bin/true"}}
    jobs = [
        {"name": "fast", "schedule": "@every 500ms", **shell},
        {"name": "odd", "schedule": "@every soon", **shell},
        {"name": "mail", "schedule": "@hourly", "executor": "gcppubsub", "executor_config": {}},
    ]
    result = dkron.convert(json.dumps(jobs), OPTIONS)
    assert [j["schedule"] for j in result.jobs] == ["@every 1s"]
    assert [n.message for n in result.notes if n.job == "fast" and n.kind.value == "schedule"] == [
        "@every 500ms: cronwheel's intervals are whole seconds: @every 1s",
        "@every without 'from' fires at the Unix epoch plus whole intervals, not from when Dkron loaded "
        "the job",
    ]
    assert [(source, kind) for source, _, kind in notes(result) if kind == "skipped"] == [
        ("job odd", "skipped"),
        ("job mail", "skipped"),
    ]


@pytest.mark.parametrize(
    ("text", "message"), [("{nope", "not valid JSON"), ('[{"schedule": "@daily"}]', "item 1")]
)
def test_unreadable_input(text: str, message: str) -> None:
    with pytest.raises(UnreadableInputError, match=message):
        dkron.convert(text, OPTIONS)
