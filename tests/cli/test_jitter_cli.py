"""A job's jitter window from the command line: ``--jitter`` on create and update (``30s``,
``1.5``, ``2m``), shown by ``jobs get``, refused with a clear message and a non-zero exit when not
shorter than the schedule's shortest gap (nothing written), and ``schedule preview --jitter``."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from click.testing import CliRunner, Result

from cronwheel.cli import cli
from cronwheel.schedule.jitter import fire_at

from .conftest import Server

HOOK = "https://hooks.example.com/nightly"


def _create(server: Server, *extra: str) -> Result:
    return server.run(
        "jobs", "create", "--team", "data", "--name", "hourly", "--schedule", "0 * * * *",
        "--http", HOOK, *extra,
    )  # fmt: skip


def test_create_and_update_with_a_window(server: Server) -> None:
    result = _create(server, "--jitter", "2m")
    assert result.exit_code == 0, result.stderr
    assert "jitter:      up to 120s after each slot" in result.stdout
    assert "(fires " in result.stdout
    job = server.json("jobs", "get", "data/hourly")
    assert job["jitter_s"] == 120.0
    updated = server.json("jobs", "update", "data/hourly", "--jitter", "1.5")
    assert updated["jitter_s"] == 1.5
    assert server.json("jobs", "update", "data/hourly", "--jitter", "0")["jitter_s"] == 0.0


def test_a_window_as_long_as_the_gap_is_refused_and_nothing_is_written(server: Server) -> None:
    result = _create(server, "--jitter", "1h")
    assert result.exit_code != 0
    assert "jitter_s 3600 must be shorter than the shortest gap" in result.stderr
    assert server.json("jobs", "list", "--team", "data")["items"] == []


def test_a_span_that_is_not_one_is_a_usage_error(server: Server) -> None:
    result = _create(server, "--jitter", "soon")
    assert result.exit_code == 2
    assert "is not a span" in result.stderr


def test_the_preview_shows_each_fire_time_with_a_seed() -> None:
    runner = CliRunner()
    args = [
        "schedule",
        "preview",
        "0 * * * *",
        "--after",
        "2026-03-02T12:00:00Z",
        "-n",
        "3",
        "--jitter",
        "10m",
    ]
    seeded = runner.invoke(cli, [*args, "--seed", "job-1", "-o", "json"])
    assert seeded.exit_code == 0, seeded.output
    fires = json.loads(seeded.stdout)["fires"]
    for fire in fires:
        slot = datetime.fromisoformat(fire["utc"].replace("Z", "+00:00")).astimezone(UTC)
        fires_at = datetime.fromisoformat(fire["fires_at"].replace("Z", "+00:00"))
        assert fires_at == fire_at("job-1", slot, 600.0)
    table = runner.invoke(cli, [*args, "--seed", "job-1"])
    assert table.stdout.count("fires 2026-03-02T") == 3
    unseeded = runner.invoke(cli, args)
    assert "depends on the job id" in unseeded.stderr
