"""``cronwheel jobs describe JOB`` against a real server: the definition, the next fire times
(the server's schedule preview, from its clock), the last runs and the notification rules in
force, in one screen or one JSON document; by id or TEAM/NAME."""

from __future__ import annotations

from typing import Any

from .conftest import Server

RULES = "- conditions: [failure]\n  channels:\n    - {type: email, to: [ops@example.com]}\n"


def nightly(server: Server) -> dict[str, Any]:
    job: dict[str, Any] = server.json(
        "jobs", "create", "--team", "data", "--name", "nightly", "--schedule", "0 3 * * *",
        "--tz", "Europe/Berlin", "--http", "https://hooks.example.com/nightly",
    )  # fmt: skip
    return job


def test_describe_shows_definition_next_fires_runs_and_rules(server: Server) -> None:
    job = nightly(server)
    assert server.run("notifications", "set", "--team", "data", "-", input=RULES).exit_code == 0
    run_id = server.run("jobs", "trigger", "data/nightly").stdout.split()[2]
    result = server.run("jobs", "describe", "data/nightly", "--fires", "2")
    assert result.exit_code == 0, result.stderr
    definition, fires, runs, rules = result.stdout.split("\n\n")
    assert definition.startswith(f"id:          {job['id']}\nteam/name:   data/nightly\n")
    assert "0 3 * * *  (Europe/Berlin)" in definition
    # the server's clock is 2026-03-02 12:00Z: the next 03:00 in Berlin are on the 3rd and the 4th
    assert fires.splitlines() == [
        "Next fires (Europe/Berlin, UTC):",
        "  2026-03-03 03:00:00 Tue  +01:00  2026-03-03T02:00:00Z",
        "  2026-03-04 03:00:00 Wed  +01:00  2026-03-04T02:00:00Z",
    ]
    assert runs.splitlines()[0] == "Last runs:"
    assert runs.splitlines()[2].strip().startswith(f"{run_id}  data/nightly  manual")
    assert rules.splitlines()[:2] == ["Notifications:", "  source: team"]
    assert "email:ops@example.com" in rules
    assert server.run("jobs", "describe", job["id"], "--fires", "2").stdout == result.stdout


def test_describe_as_json_is_one_document(server: Server) -> None:
    job = nightly(server)
    assert server.run("jobs", "pause", "data/nightly").exit_code == 0
    data = server.json("jobs", "describe", job["id"])
    assert set(data) == {"job", "next_fires", "runs", "notifications"}
    assert data["job"]["id"] == job["id"]
    assert [fire["utc"] for fire in data["next_fires"]][:1] == ["2026-03-03T02:00:00Z"]
    assert len(data["next_fires"]) == 5
    assert (data["runs"], data["notifications"]) == ([], {"rules": [], "source": "none"})
    paused = server.run("jobs", "describe", job["id"]).stdout
    assert "Next fires (Europe/Berlin, UTC): paused, these are the schedule's" in paused
    assert "  no runs" in paused


def test_describe_an_unknown_job_is_a_404(server: Server) -> None:
    result = server.run("jobs", "describe", "data/nowhere")
    assert result.exit_code == 2
    assert "not found" in result.stderr.lower()
