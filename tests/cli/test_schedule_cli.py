"""``cronwheel schedule preview -o json`` prints what ``POST /v1/schedules/preview`` answers."""

from __future__ import annotations

import json
from typing import Any

import pytest
from click.testing import CliRunner

from cronwheel.cli import cli
from cronwheel.client import Client

from .conftest import Server

CASES = [
    # CLI arguments, the same request as an API body
    (
        ["30 2 * * *", "--tz", "America/New_York", "--after", "2026-03-07", "-n", "3"],
        {"expression": "30 2 * * *", "timezone": "America/New_York", "after": "2026-03-07T00:00:00-05:00",
         "count": 3},
    ),
    (
        ["*/30 1 * * *", "--tz", "Europe/Berlin", "--after", "2026-10-25T00:00:00Z", "-n", "5",
         "--dst-fold", "both"],
        {"expression": "*/30 1 * * *", "timezone": "Europe/Berlin", "after": "2026-10-25T00:00:00Z",
         "count": 5, "dst_fold": "both"},
    ),
    (
        ["H H * * 1-5", "--seed", "job-42", "--dst-gap", "skip", "--after", "2026-01-01T09:30:00+01:00"],
        {"expression": "H H * * 1-5", "seed": "job-42", "dst_gap": "skip",
         "after": "2026-01-01T09:30:00+01:00"},
    ),
    (
        ["0 0 31 * *", "--tz", "Asia/Kolkata", "--after", "2026-02-01T10:00", "-n", "2"],
        {"expression": "0 0 31 * *", "timezone": "Asia/Kolkata", "after": "2026-02-01T10:00:00+05:30",
         "count": 2},
    ),
]  # fmt: skip


@pytest.mark.parametrize(("args", "body"), CASES)
def test_cli_json_is_the_api_json(server: Server, args: list[str], body: dict[str, Any]) -> None:
    result = CliRunner().invoke(cli, ["schedule", "preview", *args, "-o", "json"])
    assert result.exit_code == 0, result.stderr
    with Client(server.url, token=server.token) as client:
        from_api = client.preview_schedule(**body)
    assert json.loads(result.stdout) == from_api
    assert from_api["fires"]  # the comparison covers fire times, not two empty lists


def test_preview_needs_no_server() -> None:
    result = CliRunner().invoke(
        cli, ["schedule", "preview", "@daily", "-n", "1"], env={"CRONWHEEL_URL": "http://127.0.0.1:9"}
    )
    assert result.exit_code == 0, result.stderr
    assert "next 1 after" in result.stdout
    assert result.stdout.splitlines()[1] == "at 00:00 every day"  # the schedule in words
