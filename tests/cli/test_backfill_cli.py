"""``cronwheel jobs backfill``, ``jobs backfills`` and ``jobs cancel-backfill`` against a live API
server: the dry run's list, the progress bar while the server's backfiller records the runs, a
repeat that creates nothing, a cancellation that keeps the runs created, and bad input refused
with a clear message and a non-zero exit, writing nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from api.doubles import RecordingQueue
from cronwheel.cli import backfilling
from cronwheel.scheduler.backfiller import Backfiller
from cronwheel.store.sql import open_store

from .conftest import Server

HOOK = "https://hooks.example.com/hourly"
RANGE = ("--from", "2026-03-02T08:00:00Z", "--to", "2026-03-02T10:00:00+00:00")  # 08:00, 09:00, 10:00


def create(server: Server) -> dict[str, Any]:
    job: dict[str, Any] = server.json(
        "jobs", "create", "--team", "data", "--name", "hourly", "--schedule", "0 * * * *", "--tz", "UTC",
        "--http", HOOK,
    )  # fmt: skip
    return job


def advance_backfills(server: Server, runs_per_s: float) -> None:
    """One pass of a backfiller over the server's database (as a scheduler node runs it)."""

    async def one_pass() -> None:
        store = await open_store(f"sqlite:///{server.home.parent / 'cronwheel.db'}", migrate=False)
        try:
            await Backfiller(store, RecordingQueue(), server.clock, runs_per_s=runs_per_s).advance(
                server.clock.now()
            )
        finally:
            await store.close()

    asyncio.run(one_pass())


def test_a_dry_run_lists_the_slots_and_writes_nothing(server: Server) -> None:
    create(server)
    result = server.run("jobs", "backfill", "data/hourly", *RANGE, "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert "to create:   3" in result.stdout
    assert "2026-03-02 09:00:00Z  create" in result.stdout
    assert server.json("jobs", "backfills", "data/hourly") == []


def test_a_backfill_shows_its_progress_until_through_and_a_repeat_creates_nothing(
    server: Server, monkeypatch: pytest.MonkeyPatch
) -> None:
    create(server)
    monkeypatch.setattr(backfilling, "pause", lambda seconds: advance_backfills(server, 2))
    result = server.run("jobs", "backfill", "data/hourly", *RANGE)
    assert result.exit_code == 0, result.stderr
    assert "[" + "#" * 20 + "-" * 10 + "] 2/3 slots" in result.stderr  # two runs a pass
    assert "[" + "#" * 30 + "] 3/3 slots" in result.stderr
    assert "done: 3 created, 0 already had runs, 0 to go (of 3)" in result.stdout
    runs = server.json("runs", "list", "--job", "data/hourly")["items"]
    assert sorted((run["slot"], run["kind"]) for run in runs) == [
        (f"2026-03-02T{hour}:00:00Z", "backfill") for hour in ("08", "09", "10")
    ]
    again = server.run("jobs", "backfill", "data/hourly", *RANGE)
    assert again.exit_code == 0, again.stderr
    assert "done: 0 created, 3 already had runs, 0 to go (of 3)" in again.stdout
    assert len(server.json("runs", "list", "--job", "data/hourly")["items"]) == 3
    listed = server.json("jobs", "backfills", "data/hourly")
    assert [(item["state"], item["created"], item["existing"]) for item in listed] == [
        ("done", 0, 3),
        ("done", 3, 0),
    ]


def test_a_running_backfill_is_cancelled_and_a_second_cancel_refused(server: Server) -> None:
    create(server)
    started = server.run("jobs", "backfill", "data/hourly", *RANGE, "--no-wait")
    assert started.exit_code == 0, started.stderr
    backfill_id = server.json("jobs", "backfills", "data/hourly")[0]["id"]
    advance_backfills(server, 1)  # one run created

    result = server.run("jobs", "cancel-backfill", "data/hourly", backfill_id)

    assert result.exit_code == 0, result.stderr
    assert (
        f"backfill {backfill_id} cancelled: 1 created, 0 already had runs, 2 never recorded: cancelled, "
        "or its job deleted (of 3)"
    ) in result.stdout
    advance_backfills(server, 10)
    runs = server.json("runs", "list", "--job", "data/hourly")["items"]
    assert [(run["slot"], run["kind"]) for run in runs] == [("2026-03-02T08:00:00Z", "backfill")]
    again = server.run("jobs", "cancel-backfill", "data/hourly", backfill_id)
    assert again.exit_code == 2
    assert f"Not running (409): backfill {backfill_id} is cancelled, not running" in again.stderr
    unknown = server.run("jobs", "cancel-backfill", "data/hourly", "nope")
    assert unknown.exit_code == 2
    assert "Not found (404)" in unknown.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--from", "2026-03-02T10:00:00Z", "--to", "2026-03-02T08:00:00Z"), "must be after from"),
        (("--from", "2026-03-02T08:00:00Z", "--to", "2026-03-02T13:00:00Z"), "is in the future"),
        (("--from", "2026-03-02T08:00:00", "--to", "2026-03-02T10:00:00Z"), "from: "),
        (("--from", "last week", "--to", "2026-03-02T10:00:00Z"), "RFC 3339"),
    ],
)
def test_bad_input_is_a_clear_message_a_non_zero_exit_and_nothing_written(
    server: Server, args: tuple[str, ...], message: str
) -> None:
    create(server)
    result = server.run("jobs", "backfill", "data/hourly", *args, "--no-wait")
    assert result.exit_code == 2, result.stdout
    assert message in result.stderr
    assert server.json("jobs", "backfills", "data/hourly") == []


def test_a_range_beyond_the_limit_asks_for_yes(server: Server) -> None:
    server.json(
        "jobs", "create", "--team", "data", "--name", "often", "--schedule", "* * * * *", "--tz", "UTC",
        "--http", HOOK,
    )  # fmt: skip
    wide = ("--from", "2026-03-01T00:00:00Z", "--to", "2026-03-02T00:00:00Z")  # 1441 slots
    refused = server.run("jobs", "backfill", "data/often", *wide, "--no-wait")
    assert refused.exit_code == 2
    assert "1441 slots" in refused.stderr
    assert "pass --yes" in refused.stderr
    assert server.json("jobs", "backfills", "data/often") == []
    accepted = server.run("jobs", "backfill", "data/often", *wide, "--no-wait", "--yes")
    assert accepted.exit_code == 0, accepted.stderr
    assert "running: 0 created, 0 already had runs, 1441 to go (of 1441)" in accepted.stdout
