"""The pieces every importer uses: names, command lines, intervals, DST folds, weekdays."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from cronwheel.importers.commands import command
from cronwheel.importers.draft import Draft, finish, valid_name
from cronwheel.importers.report import NoteKind
from cronwheel.importers.timing import every, fires_within, folded_fires, instant
from cronwheel.importers.weekdays import aps_days, cron_days

NOW = datetime(2026, 12, 7, tzinfo=UTC)


@pytest.mark.parametrize(
    ("wanted", "name"),
    [
        ("nightly backup", "nightly-backup"),
        ("a/b:c", "a-b-c"),
        ("--x--", "x"),
        ("äöü", "job-1"),
        ("x" * 150, "x" * 96),
    ],
)
def test_valid_names(wanted: str, name: str) -> None:
    assert valid_name(wanted, "job-1") == name


def test_names_are_unique_whatever_the_case() -> None:
    drafts = [Draft("a", "Backup"), Draft("b", "backup"), Draft("c", "backup"), Draft("d", "backup-2")]
    result = finish([*drafts], "ops")
    assert [job["name"] for job in result.jobs] == ["Backup", "backup-2", "backup-3", "backup-2-2"]
    renamed = [(n.source, n.message) for n in result.notes if n.kind is NoteKind.RENAMED]
    assert renamed == [
        ("b", "'backup' became 'backup-2' (taken by an earlier job)"),
        ("c", "'backup' became 'backup-3' (taken by an earlier job)"),
        ("d", "'backup-2' became 'backup-2-2' (taken by an earlier job)"),
    ]


def test_actions_name_the_job_once_it_is_named() -> None:
    draft = Draft("line 1", "x y")
    draft.note(NoteKind.PAUSED, "suspended", "cronwheel jobs pause {job}")
    result = finish([draft], "ops")
    assert result.notes[-1].action == "cronwheel jobs pause ops/x-y"


@pytest.mark.parametrize(
    ("line", "argv"),
    [
        ("/usr/bin/backup --full", ["/usr/bin/backup", "--full"]),
        ('mail -s "Daily report" a@example.com', ["mail", "-s", "Daily report", "a@example.com"]),
        ("backup > /var/log/b.log 2>&1", ["/bin/sh", "-c", "backup > /var/log/b.log 2>&1"]),
        ("a && b", ["/bin/sh", "-c", "a && b"]),
        ("echo $HOME", ["/bin/sh", "-c", "echo $HOME"]),
        ("rm /tmp/*.tmp", ["/bin/sh", "-c", "rm /tmp/*.tmp"]),
        ("ls ~/x", ["/bin/sh", "-c", "ls ~/x"]),
        ("FOO=1 run", ["/bin/sh", "-c", "FOO=1 run"]),
        ("echo 'unclosed", ["/bin/sh", "-c", "echo 'unclosed"]),
    ],
)
def test_command_lines(line: str, argv: list[str]) -> None:
    assert command(line).argv == argv
    assert command(line).wrapped is (argv[:2] == ["/bin/sh", "-c"])


def test_intervals_and_instants() -> None:
    assert every(90) == "@every 1m30s"
    assert every(86_400 + 3600) == "@every 1d1h"
    assert every(0.2) == "@every 1s"
    assert every(60, datetime(2027, 1, 1, tzinfo=UTC)) == "@every 1m from 2027-01-01T00:00:00Z"
    assert instant(datetime.fromisoformat("2027-01-01T09:00:00+01:00")) == "2027-01-01T09:00:00+01:00"


def test_folds_only_for_fixed_times_in_zones_with_dst() -> None:
    assert folded_fires("30 1 * * *", "America/New_York", NOW) == "01:00-02:00 on 2027-11-07"
    assert folded_fires("30 3 * * *", "America/New_York", NOW) is None  # not in the repeated hour
    assert folded_fires("*/5 * * * *", "America/New_York", NOW) is None  # runs on both passes anyway
    assert folded_fires("30 1 * * *", "UTC", NOW) is None


def test_fires_within() -> None:
    assert fires_within("*/10 * * * *", "UTC", 600, NOW)
    assert not fires_within("0 3 * * *", "UTC", 3600, NOW)
    assert fires_within("@every 30s", "UTC", 60, NOW)
    assert not fires_within("@at 2027-01-01T00:00:00Z", "UTC", 10**6, NOW)


@pytest.mark.parametrize(
    ("text", "cron"),
    [
        ("0-4", "MON-FRI"),
        ("mon-fri", "MON-FRI"),
        ("6", "SUN"),
        ("5,6", "SAT,SUN"),
        ("*/2", "MON,WED,FRI,SUN"),
        ("1-3,5", "TUE-THU,SAT"),
        ("*", "*"),
    ],
)
def test_apscheduler_weekdays(text: str, cron: str) -> None:
    days = aps_days(text)
    assert days is not None
    assert cron_days(days) == cron


@pytest.mark.parametrize("text", ["7", "fri-mon", "funday", "L"])
def test_apscheduler_weekdays_refused(text: str) -> None:
    assert aps_days(text) is None
