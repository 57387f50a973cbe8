"""The command line: preview output, JSON and YAML, and precise errors with a non-zero exit.

(That ``-o json`` is the API's JSON is checked against a live server in tests/cli/test_schedule_cli.py.)"""

from __future__ import annotations

import json
import subprocess
import sys

import yaml
from click.testing import CliRunner

from cronwheel.cli import cli


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_preview_table_marks_dst_shift() -> None:
    code, out, err = run(
        "schedule", "preview", "30 2 * * *", "--tz", "America/New_York", "--after", "2026-03-07", "-n", "3"
    )
    assert code == 0
    lines = out.splitlines()
    assert "fixed-time; DST gap: shift, repeated time: first" in lines[0]
    assert lines[1] == "at 02:30 every day"
    assert lines[3].split()[:5] == ["2026-03-07", "02:30:00", "Sat", "-05:00", "2026-03-07T07:30:00Z"]
    assert lines[4].split()[:5] == ["2026-03-08", "03:00:00", "Sun", "-04:00", "2026-03-08T07:00:00Z"]
    assert "shifted: 02:30:00 does not exist (DST gap)" in lines[4]
    assert "does not exist in America/New_York" in err


def test_preview_marks_repeated_hour() -> None:
    code, out, _ = run(
        "schedule", "preview", "30 1 * * *", "--tz", "America/New_York",
        "--after", "2026-10-31T12:00:00Z", "-n", "2", "--dst-fold", "both",
    )  # fmt: skip
    assert code == 0
    lines = out.splitlines()
    assert lines[1] == "at 01:30 every day; run twice when DST repeats its time"
    assert "-04:00" in lines[3]
    assert "repeated hour, first pass" in lines[3]
    assert "-05:00" in lines[4]
    assert "repeated hour, second pass" in lines[4]


def test_preview_json() -> None:
    code, out, _ = run(
        "schedule", "preview", "0 9 1 * MON", "--after", "2026-01-01T00:00:00Z", "-n", "2", "-o", "json"
    )
    assert code == 0
    data = json.loads(out)
    assert [fire["utc"] for fire in data["fires"]] == ["2026-01-01T09:00:00Z", "2026-01-05T09:00:00Z"]
    assert data["fires"][0]["kind"] == "normal"
    assert data["fires"][0]["offset_s"] == 0
    assert data["wildcard"] is False
    assert any("EITHER" in warning for warning in data["warnings"])


def test_preview_yaml_is_the_same_data() -> None:
    args = ("schedule", "preview", "30 1 * * *", "--tz", "America/New_York", "--after", "2026-11-01")
    code, as_yaml, err = run(*args, "-o", "yaml")
    assert code == 0
    assert err == ""  # warnings are part of the data, not printed beside it
    assert yaml.safe_load(as_yaml) == json.loads(run(*args, "-o", "json")[1])


def test_old_json_flag_is_a_deprecated_alias() -> None:
    args = ("schedule", "preview", "@hourly", "--after", "2026-01-01T00:00:00Z", "-n", "2")
    code, out, err = run(*args, "--json")
    assert code == 0
    assert json.loads(out) == json.loads(run(*args, "-o", "json")[1])
    assert "--json is deprecated; use -o json" in err
    code, _, err = run(*args, "--json", "-o", "yaml")
    assert code == 2
    assert "--json and -o yaml contradict" in err
    assert "--json" not in CliRunner().invoke(cli, ["schedule", "preview", "--help"]).stdout


def test_preview_limits_are_the_apis() -> None:
    code, _, err = run("schedule", "preview", "@daily", "-n", "1001")
    assert code == 2
    assert "1001 is not in the range 1<=x<=1000" in err
    code, _, err = run("schedule", "preview", "@daily", "--seed", "s" * 201)
    assert code == 2
    assert "--seed: String should have at most 200 characters" in err


def test_naive_after_is_read_in_the_zone() -> None:
    code, out, _ = run(
        "schedule",
        "preview",
        "0 12 * * *",
        "--tz",
        "Asia/Kolkata",
        "--after",
        "2026-05-01T11:59",
        "-n",
        "1",
        "-o",
        "json",
    )
    assert code == 0
    data = json.loads(out)
    assert data["after"] == "2026-05-01T06:29:00Z"  # an instant, in UTC as the API gives it
    assert data["fires"][0]["at"] == "2026-05-01T12:00:00+05:30"


def test_hash_seed_changes_minute() -> None:
    minutes = set()
    for seed in ("a", "b", "c", "d", "e"):
        code, out, _ = run("schedule", "preview", "H * * * *", "--seed", seed, "-n", "1", "-o", "json")
        assert code == 0
        minutes.add(json.loads(out)["fires"][0]["at"][14:16])
    assert len(minutes) > 1


def test_bad_expression_exits_non_zero_with_the_reason() -> None:
    code, out, err = run("schedule", "preview", "61 * * * *")
    assert code == 2
    assert out == ""
    assert "minute field (field 1, column 1): 61 is out of range 0-59" in err


def test_bad_zone_and_bad_after() -> None:
    code, _, err = run("schedule", "preview", "* * * * *", "--tz", "Nowhere/Land")
    assert code == 2
    assert "unknown time zone 'Nowhere/Land'" in err
    code, _, err = run("schedule", "preview", "* * * * *", "--after", "tomorrow")
    assert code == 2
    assert "'tomorrow' is not an ISO 8601" in err


def test_console_script_runs() -> None:
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "cronwheel",
            "schedule",
            "preview",
            "@daily",
            "--after",
            "2026-01-01T00:00Z",
            "-n",
            "1",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert "2026-01-02T00:00:00Z" in done.stdout
    done = subprocess.run(
        [sys.executable, "-m", "cronwheel", "schedule", "preview", "* * *"],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 2
    assert "expected 5 fields" in done.stderr
