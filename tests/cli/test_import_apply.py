"""`cronwheel import` then `cronwheel apply -f`: what an importer writes is what a server takes."""

from __future__ import annotations

from pathlib import Path

from .conftest import Server

BEAT = """\
timezone: Europe/Berlin
beat_schedule:
  nightly-export:
    task: myapp.exports.nightly
    schedule: {crontab: {minute: 15, hour: 2, day_of_week: "1-5"}}
    kwargs: {full: true}
"""


def test_an_imported_file_applies(server: Server, tmp_path: Path) -> None:
    source, jobs, report = tmp_path / "beat.yaml", tmp_path / "jobs.yaml", tmp_path / "report.txt"
    source.write_text(BEAT)
    imported = server.bare(
        "import", "celery", str(source), "--team", "data", "-o", str(jobs), "--report", str(report)
    )
    assert imported.exit_code == 0, imported.stderr
    applied = server.run("apply", "-f", str(jobs))
    assert applied.exit_code == 0, applied.stderr
    assert applied.stdout.splitlines() == [
        "+ create data/nightly-export",
        "Applied: 1 created, 0 updated, 0 deleted, 0 unchanged.",
    ]
    stored = server.json("jobs", "get", "data/nightly-export")
    assert (stored["schedule"], stored["timezone"]) == ("15 2 * * 1-5", "Europe/Berlin")
    assert stored["target"] == {"type": "python", "function": "myapp.exports:nightly"}
    assert stored["payload"] == {"args": [], "kwargs": {"full": True}}
    assert stored["misfire"]["policy"] == "run_once"
    again = server.run("apply", "-f", str(jobs))
    assert again.stdout.splitlines() == ["No changes: 1 job(s) already match " + str(jobs) + "."]


DKRON = """[{"name": "ping", "schedule": "0 0 * * * *", "timezone": "UTC", "disabled": true,
  "executor": "http", "executor_config": {"method": "GET", "url": "https://hooks.example.com/ping"}}]"""


def test_a_suspended_job_is_created_active_and_apply_says_so(server: Server, tmp_path: Path) -> None:
    source, jobs, report = tmp_path / "dkron.json", tmp_path / "jobs.yaml", tmp_path / "report.txt"
    source.write_text(DKRON)
    imported = server.bare(
        "import", "dkron", str(source), "--team", "web", "-o", str(jobs), "--report", str(report)
    )
    assert imported.exit_code == 0, imported.stderr
    assert "    run: cronwheel jobs pause web/ping" in report.read_text().splitlines()
    applied = server.run("apply", "-f", str(jobs))
    assert applied.exit_code == 0, applied.stderr
    assert (
        "note: web/ping: the file says paused: true, the server's job will be created active"
        in applied.stderr
    )
    assert server.json("jobs", "get", "web/ping")["paused"] is False
    paused = server.run("jobs", "pause", "web/ping")
    assert paused.exit_code == 0, paused.stderr
    assert server.run("apply", "-f", str(jobs)).stdout.startswith("No changes")
