"""``cronwheel jobs`` and ``cronwheel runs`` against a live API server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from click.testing import CliRunner

from cronwheel.cli import cli

from .conftest import Server, free_port

HOOK = "https://hooks.example.com/nightly"


def create(server: Server, name: str = "nightly", *extra: str) -> dict[str, Any]:
    job: dict[str, Any] = server.json(
        "jobs", "create", "--team", "data", "--name", name, "--schedule", "0 3 * * *",
        "--tz", "Europe/Berlin", "--http", HOOK, *extra,
    )  # fmt: skip
    return job


def test_create_with_flags_prints_the_job(server: Server) -> None:
    result = server.run(
        "jobs", "create", "--team", "data", "--name", "nightly", "--schedule", "0 3 * * *",
        "--tz", "Europe/Berlin", "--http", HOOK, "--header", "X-Token=abc", "--label", "tier=gold",
        "--payload", '{"full": true}', "--max-attempts", "3", "--misfire", "run_once", "--overlap", "forbid",
        "--timeout", "90",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    out = result.stdout
    assert "team/name:   data/nightly" in out
    assert "0 3 * * *  (Europe/Berlin)" in out
    assert "in words:    at 03:00 every day" in out
    assert f"http POST {HOOK}" in out
    assert "3 attempts" in out
    assert "run_once" in out
    assert "next run:    2026-03-03 02:00:00Z" in out
    job = server.json("jobs", "get", "data/nightly")
    assert job["target"]["headers"] == {"X-Token": "abc"}
    assert job["labels"] == {"tier": "gold"}
    assert job["payload"] == {"full": True}
    assert job["retry"]["max_attempts"] == 3
    assert (job["misfire"]["policy"], job["overlap"], job["timeout_s"]) == ("run_once", "forbid", 90.0)


def test_delete_after_success_flags_on_a_one_time_job_and_refused_elsewhere(server: Server) -> None:
    once = ("--team", "data", "--name", "once", "--schedule", "@at 2026-03-04T00:00:00Z", "--http", HOOK)
    result = server.run("jobs", "create", *once, "--delete-after-success")
    assert result.exit_code == 0, result.stderr
    assert "on success:  delete the job\n" in result.stdout
    assert server.json("jobs", "get", "data/once")["delete_after_success"] is True
    kept = server.run("jobs", "update", "data/once", "--keep-after-success")
    assert kept.exit_code == 0, kept.stderr
    assert server.json("jobs", "get", "data/once")["delete_after_success"] is False
    cron = ("--team", "data", "--name", "cron", "--schedule", "0 3 * * *", "--http", HOOK)
    refused = server.run("jobs", "create", *cron, "--delete-after-success")
    assert refused.exit_code == 2
    assert "Only for one-time jobs (422)" in refused.stderr
    assert "delete_after_success is for one-time jobs only" in refused.stderr
    assert [job["name"] for job in server.json("jobs", "list")["items"]] == ["once"]


def test_create_from_yaml_and_json_files(server: Server, tmp_path: Path) -> None:
    spec = {
        "team": "web",
        "name": "sitemap",
        "schedule": "*/30 * * * *",
        "target": {"type": "python", "function": "myapp.tasks:sitemap"},
        "start_at": "2026-04-01T00:00:00+02:00",
    }
    (tmp_path / "job.yaml").write_text(yaml.safe_dump(spec))
    job = server.json("jobs", "create", "-f", str(tmp_path / "job.yaml"))
    assert job["start_at"] == "2026-03-31T22:00:00Z"  # YAML did not turn it into a naive datetime
    assert job["next_run_at"] == "2026-03-31T22:00:00Z"
    (tmp_path / "job.json").write_text(json.dumps({**spec, "name": "robots"}))
    other = server.json("jobs", "create", "-f", str(tmp_path / "job.json"), "--name", "robots-2")
    assert other["name"] == "robots-2"  # flags override the file
    from_stdin = server.run("jobs", "create", "-f", "-", input=yaml.safe_dump({**spec, "name": "stdin"}))
    assert from_stdin.exit_code == 0, from_stdin.stderr


def test_list_filters_and_formats(server: Server) -> None:
    create(server, "a", "--label", "tier=gold")
    create(server, "b", "--label", "tier=silver")
    server.run("jobs", "pause", "data/b")
    table = server.run("jobs", "list")
    assert table.exit_code == 0
    lines = table.stdout.splitlines()
    assert lines[0].split() == [
        "ID",
        "TEAM",
        "NAME",
        "SCHEDULE",
        "TIMEZONE",
        "NEXT",
        "RUN",
        "LAST",
        "RUN",
        "PAUSED",
    ]
    assert len(lines) == 3
    assert [job["name"] for job in server.json("jobs", "list", "--label", "tier=gold")["items"]] == ["a"]
    assert [job["name"] for job in server.json("jobs", "list", "--paused")["items"]] == ["b"]
    assert [job["name"] for job in server.json("jobs", "list", "--active")["items"]] == ["a"]
    assert server.json("jobs", "list", "--team", "nobody")["items"] == []
    as_yaml = server.run("jobs", "list", "-o", "yaml")
    assert [job["name"] for job in yaml.safe_load(as_yaml.stdout)["items"]] == ["a", "b"]
    page = server.json("jobs", "list", "--limit", "1")
    assert len(page["items"]) == 1
    rest = server.json("jobs", "list", "--cursor", page["next_cursor"])
    assert [job["name"] for job in rest["items"]] == ["b"]
    empty = server.run("jobs", "list", "--team", "nobody")
    assert empty.stdout.strip() == "no jobs"
    assert server.run("jobs", "list", "--late").stdout.strip() == "no jobs"  # both on time


def test_get_by_id_and_by_team_name(server: Server) -> None:
    job = create(server)
    assert server.json("jobs", "get", job["id"])["id"] == job["id"]
    assert server.json("jobs", "get", "data/nightly")["id"] == job["id"]
    missing = server.run("jobs", "get", "data/nothing")
    assert missing.exit_code == 2
    assert "team 'data' has no job named 'nothing'" in missing.stderr
    unknown = server.run("jobs", "get", "0000")
    assert unknown.exit_code == 2
    assert "Not found (404): job 0000 not found" in unknown.stderr


def test_update_patch_put_and_if_version(server: Server, tmp_path: Path) -> None:
    create(server, "nightly", "--label", "tier=gold")
    patched = server.json("jobs", "update", "data/nightly", "--schedule", "0 4 * * *")
    assert patched["schedule"] == "0 4 * * *"
    assert patched["labels"] == {"tier": "gold"}  # PATCH kept the rest
    assert patched["version"] == 2
    stale = server.run("jobs", "update", "data/nightly", "--schedule", "0 5 * * *", "--if-version", "1")
    assert stale.exit_code == 2
    assert "Precondition failed (412)" in stale.stderr
    spec = {
        "team": "data",
        "name": "nightly",
        "schedule": "0 6 * * *",
        "target": {"type": "http", "url": HOOK},
    }
    (tmp_path / "nightly.yaml").write_text(yaml.safe_dump(spec))
    replaced = server.json(
        "jobs", "update", "data/nightly", "-f", str(tmp_path / "nightly.yaml"), "--if-version", "2"
    )
    assert (replaced["schedule"], replaced["labels"], replaced["version"]) == ("0 6 * * *", {}, 3)
    nothing = server.run("jobs", "update", "data/nightly")
    assert nothing.exit_code == 2
    assert "nothing to change" in nothing.stderr


def test_bad_input_is_exit_2_with_the_field(server: Server) -> None:
    result = server.run(
        "jobs", "create", "--team", "data", "--name", "x", "--schedule", "0 25 * * *", "--http", HOOK
    )
    assert result.exit_code == 2
    assert "Invalid schedule (422)" in result.stderr
    assert "schedule: 25 is out of range 0-23 [hour field, column 3]" in result.stderr
    fields = server.run(
        "jobs", "create", "--team", "a b", "--name", "x", "--schedule", "* * * * *", "--http", HOOK
    )
    assert fields.exit_code == 2
    assert "team: String should match pattern" in fields.stderr
    bad_payload = server.run("jobs", "create", "--payload", "{nope")
    assert bad_payload.exit_code == 2
    assert "--payload" in bad_payload.stderr
    assert server.json("jobs", "list")["items"] == []


def test_delete(server: Server) -> None:
    job = create(server)
    stale = server.run("jobs", "delete", "data/nightly", "--if-version", "9")
    assert stale.exit_code == 2
    result = server.run("jobs", "delete", "data/nightly")
    assert result.exit_code == 0
    assert result.stdout.strip() == f"deleted job {job['id']}"
    assert server.run("jobs", "get", job["id"]).exit_code == 2


def test_pause_resume(server: Server) -> None:
    create(server)
    paused = server.run("jobs", "pause", "data/nightly", "--note", "migration")
    assert paused.exit_code == 0
    assert paused.stdout.startswith("paused data/nightly")
    job = server.json("jobs", "get", "data/nightly")
    assert (job["paused"], job["pause_note"]) == (True, "migration")
    assert "yes (migration)" in server.run("jobs", "get", "data/nightly").stdout
    resumed = server.run("jobs", "resume", "data/nightly", "--missed", "misfire")
    assert resumed.exit_code == 0
    assert "next run 2026-03-03 02:00:00Z" in resumed.stdout
    assert server.json("jobs", "get", "data/nightly")["paused"] is False


def test_trigger_and_runs(server: Server) -> None:
    job = create(server)
    first = server.run("jobs", "trigger", "data/nightly", "--payload", '{"n": 1}', "--idempotency-key", "k1")
    assert first.exit_code == 0, first.stderr
    assert first.stdout.startswith("triggered: run ")
    run_id = first.stdout.split()[2]
    again = server.run("jobs", "trigger", "data/nightly", "--idempotency-key", "k1")
    assert again.stdout.strip() == f"already triggered: run {run_id} PENDING"
    assert [t.run_id for t in server.queue.published] == [run_id]
    runs = server.json("runs", "list", "--job", "data/nightly")["items"]
    assert [(r["id"], r["payload"], r["kind"]) for r in runs] == [(run_id, {"n": 1}, "manual")]
    table = server.run("runs", "list", "--job", job["id"])
    assert run_id in table.stdout
    assert "0.000s" in table.stdout  # queued lateness
    detail = server.run("runs", "get", run_id)
    assert detail.exit_code == 0
    assert "state:" in detail.stdout
    assert "history:" in detail.stdout
    assert server.json("runs", "get", run_id)["events"][0]["state"] == "PENDING"
    assert server.json("runs", "list", "--state", "success")["items"] == []
    assert server.run("runs", "get", "nope").exit_code == 2


def test_url_from_the_environment(server: Server) -> None:
    create(server)
    result = server.bare(
        "jobs", "list", "-o", "json", env={"CRONWHEEL_URL": server.url, "CRONWHEEL_TOKEN": server.token}
    )
    assert result.exit_code == 0
    assert len(json.loads(result.stdout)["items"]) == 1


def test_unreachable_server_says_where_it_tried() -> None:
    url = f"http://127.0.0.1:{free_port()}"
    result = CliRunner().invoke(cli, ["jobs", "list", "--url", url])
    assert result.exit_code == 1
    assert f"cannot reach the cronwheel API at {url}: connection refused" in result.stderr
    assert "CRONWHEEL_URL" in result.stderr
    bad_url = CliRunner().invoke(cli, ["jobs", "list", "--url", "localhost:8080"])
    assert bad_url.exit_code == 2
    assert "--url" in bad_url.stderr


def test_server_errors_are_exit_1(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    async def broken(*args: object) -> None:
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(server.store, "list_jobs", broken)
    result = server.run("jobs", "list")
    assert result.exit_code == 1
    assert "Internal server error (500)" in result.stderr
    assert "disk on fire" not in result.stderr


def test_tables_do_not_show_the_urls_credentials(server: Server, tmp_path: Path) -> None:
    """The job's own view (``-o json``) keeps the URL whole; the tables and the apply plan show
    its user info and query values as ``***``. Before, ``jobs create`` and ``jobs list`` printed
    ``https://admin:HUNTER2@...?token=...`` as it was written."""
    url = "https://admin:HUNTER2@hooks.example.com/x?token=s3cr3t&v=2"
    shown = "https://***@hooks.example.com/x?token=***&v=***"
    created = server.run(
        "jobs", "create", "--team", "data", "--name", "nightly", "--schedule", "0 3 * * *", "--http", url
    )  # fmt: skip
    listed = server.run("jobs", "list")
    got = server.run("jobs", "get", "data/nightly")
    for result in (created, listed, got):
        assert result.exit_code == 0, result.stderr
        assert "HUNTER2" not in result.stdout
        assert "s3cr3t" not in result.stdout
    assert f"http POST {shown}" in got.stdout
    assert server.json("jobs", "get", "data/nightly")["target"]["url"] == url
    target = {"type": "http", "url": url + "&w=1"}
    spec = {"team": "data", "jobs": [{"name": "nightly", "schedule": "0 3 * * *", "target": target}]}
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps(spec))
    plan = server.run("apply", "-f", str(path), "--dry-run")
    assert plan.exit_code == 0, plan.stderr
    assert f"    target.url: '{shown}' -> '{shown}&w=***'" in plan.stdout.splitlines()
    assert "HUNTER2" not in plan.stdout


def test_runs_get_lists_the_headers_each_http_attempt_sent() -> None:
    from cronwheel.cli.runs import run_detail_view

    def attempt(number: int, headers: dict[str, str] | None) -> dict[str, Any]:
        return {"number": number, "worker": "w1", "started_at": None, "finished_at": None,
                "outcome": "failure", "status_code": 500, "exit_code": None, "error": None,
                "request_headers": headers}  # fmt: skip

    run = {"id": "r1", "job_id": "j1", "job_team": "data", "job_name": "nightly", "kind": "scheduled",
           "slot": None, "state": "FAILED", "reason": None, "attempts": 2, "queued_at": None,
           "queued_lateness_s": None, "started_at": None, "start_lateness_s": None, "finished_at": None,
           "next_attempt_at": None, "events": [],
           "attempt_details": [attempt(1, {"Host": "h", "Authorization": "[redacted]"}),
                               attempt(2, None)]}  # fmt: skip
    shown = run_detail_view(run)
    assert "headers sent (attempt 1):\n  Host: h\n  Authorization: [redacted]" in shown
    assert "attempt 2)" not in shown  # no request was sent: nothing to list


def test_runs_get_lists_the_headers_answered_and_a_running_attempts_output_so_far() -> None:
    from cronwheel.cli.runs import run_detail_view

    done = {
        "number": 1,
        "worker": "w1",
        "started_at": None,
        "finished_at": "2026-03-02T12:00:01Z",
        "outcome": "failure",
        "status_code": 500,
        "exit_code": None,
        "error": None,
        "output": "kept",
        "request_headers": None,
        "response_headers": {"Set-Cookie": "[redacted]", "X-Id": "7"},
    }
    running = {
        "number": 2,
        "worker": "w1",
        "started_at": None,
        "finished_at": None,
        "outcome": None,
        "status_code": None,
        "exit_code": None,
        "error": None,
        "output": "first\nsecond\n",
        "request_headers": None,
        "response_headers": None,
    }
    run = {"id": "r1", "job_id": "j1", "job_team": "data", "job_name": "nightly", "kind": "scheduled",
           "slot": None, "state": "RUNNING", "reason": None, "attempts": 2, "queued_at": None,
           "queued_lateness_s": None, "started_at": None, "start_lateness_s": None, "finished_at": None,
           "next_attempt_at": None, "events": [], "attempt_details": [done, running]}  # fmt: skip
    shown = run_detail_view(run)
    assert "headers received (attempt 1):\n  Set-Cookie: [redacted]\n  X-Id: 7" in shown
    assert "output so far (attempt 2, running):\nfirst\nsecond" in shown
    assert "(attempt 1, running)" not in shown  # an attempt that ended: its output is the record's


def test_runs_get_says_a_run_released_ahead_was_queued_before_its_slot() -> None:
    from cronwheel.cli.runs import run_detail_view

    run: dict[str, Any] = {"id": "r1", "job_id": "j1", "job_team": "data", "job_name": "nightly",
           "kind": "scheduled", "slot": "2026-03-02T12:01:00Z", "state": "SUCCESS", "reason": None,
           "attempts": 1,
           "queued_at": "2026-03-02T12:00:59.6Z", "queued_lateness_s": -0.4,
           "started_at": "2026-03-02T12:01:00.002Z", "start_lateness_s": 0.002, "finished_at": None,
           "next_attempt_at": None, "events": [], "attempt_details": []}  # fmt: skip
    shown = run_detail_view(run)
    assert "(0.400s before the slot)" in shown
    assert "(0.002s after the slot)" in shown
