"""`cronwheel import` through click's runner: the file, the report, and refusals that write nothing."""

from __future__ import annotations

import json
from pathlib import Path

import yaml
from click.testing import CliRunner

from cronwheel.cli import cli

from .support import FIXTURES


def run(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(cli, ["import", *args])
    return result.exit_code, result.stdout, result.stderr


def test_writes_the_apply_file_and_the_report(tmp_path: Path) -> None:
    out, report = tmp_path / "jobs.yaml", tmp_path / "report.txt"
    path = str(FIXTURES / "cronjobs.yaml")
    code, stdout, stderr = run("k8s", path, "--team", "data", "-o", str(out), "--report", str(report))
    assert (code, stdout, stderr) == (0, "", "")
    text = out.read_text()
    assert text.startswith(f"# cronwheel import k8s {path} --team data: read the report before applying\n")
    document = yaml.safe_load(text)
    assert document["team"] == "data"
    assert [job["name"] for job in document["jobs"]] == ["nightly-report", "hello", "cache-warmer"]
    lines = report.read_text().splitlines()
    assert lines[0] == (
        f"imported 3 job(s) from k8s {path}: 3 dropped, 1 dst, 3 misfire, 1 paused, 2 retry, 2 skipped, "
        "3 target, 2 timeout, 2 timezone"
    )
    assert "    run: cronwheel jobs pause data/nightly-report" in lines


def test_stdout_and_stderr_by_default() -> None:
    code, stdout, stderr = run("crontab", str(FIXTURES / "system.crontab"), "--team", "ops", "--system")
    assert code == 0
    assert [job["name"] for job in yaml.safe_load(stdout)["jobs"]][-1] == "php-cron"
    assert stderr.startswith("imported 4 job(s) from crontab")
    assert "line 16 -> php-cron: [dropped] ran as user 'www-data'" in stderr


def test_json_report_and_default_zone(tmp_path: Path) -> None:
    source = tmp_path / "jobs.cron"
    source.write_text("0 3 * * * /usr/bin/true\n")
    code, stdout, stderr = run(
        "crontab", str(source), "--team", "ops", "--timezone", "Asia/Tokyo", "--report-format", "json"
    )
    assert code == 0
    assert yaml.safe_load(stdout)["jobs"][0]["timezone"] == "Asia/Tokyo"
    entries = json.loads(stderr)
    assert entries[-1] == {
        "source": "line 1",
        "job": "true",
        "kind": "renamed",
        "message": "the source names no job: named 'true'",
        "action": None,
    }


def test_apscheduler_module_name_from_the_file(tmp_path: Path) -> None:
    source = tmp_path / "tasks.py"
    source.write_text("@s.scheduled_job('cron', hour=2)\ndef tidy():\n    pass\n")
    code, stdout, _ = run("apscheduler", str(source), "--team", "ops")
    assert code == 0
    assert yaml.safe_load(stdout)["jobs"][0]["target"] == {"type": "python", "function": "tasks:tidy"}


def test_a_job_the_api_refuses_is_reported_not_written(tmp_path: Path) -> None:
    source = tmp_path / "beat.yaml"
    task = "proj." * 80 + "task"  # a dotted path, longer than a python target's 300 characters
    source.write_text(f"beat_schedule:\n  x:\n    task: {task}\n    schedule: {{crontab: {{hour: 3}}}}\n")
    code, stdout, stderr = run("celery", str(source), "--team", "ops")
    assert code == 0
    assert yaml.safe_load(stdout)["jobs"] == []
    assert "output -> x: [skipped] not imported: the API refuses it: target.function" in stderr


def test_unreadable_input_writes_nothing(tmp_path: Path) -> None:
    out = tmp_path / "jobs.yaml"
    code, stdout, stderr = run("k8s", str(FIXTURES / "dkron_jobs.json"), "--team", "ops", "-o", str(out))
    assert code == 2
    assert stdout == ""
    assert "document 1 is not a mapping (a Kubernetes object)" in stderr
    assert "nothing imported" in stderr
    assert not out.exists()


def test_refusals_of_the_command_line(tmp_path: Path) -> None:
    code, _, stderr = run("crontab", str(tmp_path / "missing"), "--team", "ops")
    assert code == 2
    assert "cannot read" in stderr
    code, _, stderr = run(
        "crontab", str(FIXTURES / "user.crontab"), "--team", "ops", "--timezone", "Mars/Base"
    )
    assert code == 2
    assert "unknown time zone 'Mars/Base'" in stderr
    code, _, stderr = run("crontab", str(FIXTURES / "user.crontab"), "--team", "my team")
    assert code == 2
    assert "'my team' is not a team name" in stderr
    code, _, stderr = run("nomad", str(FIXTURES / "user.crontab"), "--team", "ops")
    assert code == 2
    assert "'nomad' is not one of" in stderr
