"""The command line: preview output, JSON, and precise errors with a non-zero exit."""

from __future__ import annotations

import json
import subprocess
import sys

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
    assert lines[2].split()[:5] == ["2026-03-07", "02:30:00", "Sat", "-05:00", "2026-03-07T07:30:00Z"]
    assert lines[3].split()[:5] == ["2026-03-08", "03:00:00", "Sun", "-04:00", "2026-03-08T07:00:00Z"]
    assert "shifted: 02:30:00 does not exist (DST gap)" in lines[3]
    assert "does not exist in America/New_York" in err


def test_preview_marks_repeated_hour() -> None:
    code, out, _ = run(
        "schedule", "preview", "30 1 * * *", "--tz", "America/New_York",
        "--after", "2026-10-31T12:00:00Z", "-n", "2", "--dst-fold", "both",
    )  # fmt: skip
    assert code == 0
    lines = out.splitlines()
    assert "-04:00" in lines[2]
    assert "repeated hour, first pass" in lines[2]
    assert "-05:00" in lines[3]
    assert "repeated hour, second pass" in lines[3]


def test_preview_json() -> None:
    code, out, _ = run(
        "schedule", "preview", "0 9 1 * MON", "--after", "2026-01-01T00:00:00Z", "-n", "2", "--json"
    )
    assert code == 0
    data = json.loads(out)
    assert [fire["utc"] for fire in data["fires"]] == ["2026-01-01T09:00:00Z", "2026-01-05T09:00:00Z"]
    assert data["fires"][0]["kind"] == "normal"
    assert any("EITHER" in warning for warning in data["warnings"])


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
        "--json",
    )
    assert code == 0
    assert json.loads(out)["fires"][0]["at"] == "2026-05-01T12:00:00+05:30"


def test_hash_seed_changes_minute() -> None:
    minutes = set()
    for seed in ("a", "b", "c", "d", "e"):
        code, out, _ = run("schedule", "preview", "H * * * *", "--seed", seed, "-n", "1", "--json")
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
