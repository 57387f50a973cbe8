"""What the tables say: runs name their job ``team/name`` (a deleted job by its id, marked),
and a paused job's NEXT RUN says paused instead of a time that has passed."""

from __future__ import annotations

from typing import Any

from .conftest import Server

HOOK = "https://hooks.example.com/"


def create(server: Server, team: str, name: str) -> dict[str, Any]:
    job: dict[str, Any] = server.json(
        "jobs", "create", "--team", team, "--name", name, "--schedule", "0 3 * * *", "--http", HOOK + name
    )
    return job


def trigger(server: Server, ref: str) -> str:
    result = server.run("jobs", "trigger", ref)
    assert result.exit_code == 0, result.stderr
    return result.stdout.split()[2]


def row(table: str, run_id: str) -> list[str]:
    (line,) = [line for line in table.splitlines() if line.startswith(run_id)]
    return line.split()


def test_runs_list_names_the_job_team_slash_name(server: Server) -> None:
    kept, gone = create(server, "data", "nightly"), create(server, "web", "sitemap")
    kept_run, gone_run = trigger(server, "data/nightly"), trigger(server, "web/sitemap")
    assert server.run("jobs", "delete", "web/sitemap").exit_code == 0
    table = server.run("runs", "list").stdout
    assert row(table, kept_run)[1] == "data/nightly"
    assert row(table, gone_run)[1:3] == [gone["id"], "(deleted)"]
    assert kept["id"] not in table
    detail = server.run("runs", "get", kept_run).stdout
    assert f"job:          data/nightly ({kept['id']})" in detail
    assert f"job:          {gone['id']} (deleted)" in server.run("runs", "get", gone_run).stdout
    as_json = server.json("runs", "list")["items"]
    assert {(r["job_team"], r["job_name"]) for r in as_json} == {("data", "nightly"), (None, None)}


def test_paused_jobs_next_run_says_paused(server: Server) -> None:
    create(server, "data", "active")
    paused = create(server, "data", "resting")
    assert server.run("jobs", "pause", "data/resting").exit_code == 0
    server.clock.advance(2 * 86_400)  # the stored cursor (2026-03-03 03:00Z) is now in the past
    assert server.json("jobs", "get", "data/resting")["next_run_at"] == paused["next_run_at"]
    lines = server.run("jobs", "list").stdout.splitlines()
    resting = next(line for line in lines if " resting " in line)
    active = next(line for line in lines if " active " in line)
    assert "  paused  " in resting
    assert "2026-03-03" not in resting
    assert "2026-03-03 03:00:00Z" in active
    view = server.run("jobs", "get", "data/resting").stdout
    assert "next run:    paused" in view
    assert "2026-03-03" not in view


def test_wide_jobs_list_adds_target_queue_policies_version_and_labels(server: Server) -> None:
    create(server, "data", "nightly")
    assert (
        server.run("jobs", "update", "data/nightly", "--label", "tier=gold", "--overlap", "forbid").exit_code
        == 0
    )
    narrow = server.run("jobs", "list").stdout.splitlines()
    header, line = server.run("jobs", "list", "-o", "wide").stdout.splitlines()
    assert header.split("  ")[0] == narrow[0].split("  ")[0]
    assert header.startswith(narrow[0].rstrip())  # the narrow columns first, as they are
    assert header.split()[-6:] == ["TARGET", "QUEUE", "OVERLAP", "MISFIRE", "VERSION", "LABELS"]
    assert line.split()[-6:] == ["http", "default", "forbid", "skip", "2", "tier=gold"]


def test_wide_runs_list_adds_queue_lateness_start_duration_and_version(server: Server) -> None:
    create(server, "data", "nightly")
    run_id = trigger(server, "data/nightly")
    header, line = server.run("runs", "list", "-o", "wide").stdout.splitlines()
    assert header.split("  ")[0] == "ID"
    for column in ("ATTEMPTS", "LATENESS", "QUEUE", "QUEUED LATE", "STARTED", "DURATION", "NEXT ATTEMPT"):
        assert column in header
    assert line.startswith(run_id)
    assert line.split()[-6:] == ["default", "0.000s", "-", "-", "-", "1"]  # queued at once, not started


def test_a_run_lasts_from_its_start_to_its_end() -> None:
    from cronwheel.cli.runs import duration

    run = {"started_at": "2026-03-02T12:00:01.250000Z", "finished_at": "2026-03-02T12:00:03Z"}
    assert duration(run) == "1.750s"
    assert duration({**run, "finished_at": None}) is None


def test_runs_list_filters_as_the_api_does(server: Server) -> None:
    create(server, "data", "nightly")
    create(server, "web", "sitemap")
    data_run, web_run = trigger(server, "data/nightly"), trigger(server, "web/sitemap")
    by_team = server.json("runs", "list", "--team", "web")["items"]
    assert [run["id"] for run in by_team] == [web_run]
    by_job = server.json("runs", "list", "--job", "data/nightly", "--until", "2099-01-01T00:00:00Z")["items"]
    assert [run["id"] for run in by_job] == [data_run]
    assert server.json("runs", "list", "--reason", "misfire")["items"] == []
    assert server.json("runs", "list", "--since", "2099-01-01T00:00:00Z")["items"] == []
    refused = server.run("runs", "list", "--since", "yesterday")
    assert refused.exit_code == 2
    assert "since" in refused.stderr
    assert server.run("runs", "list", "--reason", "tired").exit_code == 2
