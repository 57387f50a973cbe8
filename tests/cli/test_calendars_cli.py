"""``cronwheel calendars ...`` against a live API server, and jobs that list calendars: flags and
``-f`` files, a refusal said clearly with a non-zero exit and nothing written, ``jobs --calendar``
and ``--calendar-shift``, and the job fields through ``export`` and ``apply``."""

from __future__ import annotations

from pathlib import Path

import yaml

from .conftest import Server

HOOK = "https://hooks.example.com/nightly"


def test_create_from_flags_and_a_file_get_list_update_delete(server: Server, tmp_path: Path) -> None:
    made = server.run(
        "calendars", "create", "data/closed", "--weekday", "sat", "--weekday", "sun", "--holidays", "DE-BY"
    )
    assert made.exit_code == 0, made.stderr
    assert made.stdout == "created calendar data/closed: sat,sun; holidays DE-BY\n"
    spec = tmp_path / "freeze.yaml"
    spec.write_text(
        yaml.safe_dump(
            {"description": "year-end freeze", "ranges": [{"from": "2027-12-20", "to": "2028-01-02"}]}
        )
    )
    frozen = server.json("calendars", "create", "data/freeze", "-f", str(spec), "--date", "2027-11-26")
    assert (frozen["dates"], frozen["ranges"]) == (
        ["2027-11-26"],
        [{"from": "2027-12-20", "to": "2028-01-02"}],
    )
    assert frozen["description"] == "year-end freeze"
    shown = server.run("calendars", "get", "data/freeze")
    assert "2027-12-20..2028-01-02" in shown.stdout
    listed = server.run("calendars", "list", "data")
    assert [line.split()[0] for line in listed.stdout.splitlines()] == ["NAME", "closed", "freeze"]
    updated = server.json("calendars", "update", "data/closed", "--weekday", "sun")
    assert (updated["weekdays"], updated["holidays"], updated["version"]) == (["sun"], None, 2)
    assert server.run("calendars", "delete", "data/freeze").stdout == "deleted calendar data/freeze\n"
    assert server.json("calendars", "list", "data")["items"][0]["name"] == "closed"


def test_a_bad_calendar_is_refused_clearly_and_nothing_written(server: Server) -> None:
    refused = server.run("calendars", "create", "data/bad", "--range", "2027-02-03..2027-02-01")
    assert refused.exit_code != 0
    assert "ranges[0]" in refused.stderr
    assert "after" in refused.stderr
    unknown = server.run("calendars", "create", "data/bad", "--holidays", "XX")
    assert unknown.exit_code != 0
    assert "holidays.country" in unknown.stderr
    assert server.json("calendars", "list", "data")["items"] == []


def test_jobs_list_calendars_and_keep_them_through_export_and_apply(server: Server, tmp_path: Path) -> None:
    assert (
        server.run("calendars", "create", "data/closed", "--weekday", "sat", "--weekday", "sun").exit_code
        == 0
    )
    job = server.json(
        "jobs", "create", "--team", "data", "--name", "payroll", "--schedule", "0 9 L * *", "--http", HOOK,
        "--calendar", "closed", "--calendar-shift", "previous",
    )  # fmt: skip
    assert (job["calendars"], job["calendar_shift"]) == (["closed"], "previous")
    assert "closed (shift to the previous open day)" in server.run("jobs", "get", job["id"]).stdout
    exported = server.run("export", "--team", "data", "-o", "yaml")
    assert exported.exit_code == 0, exported.stderr
    (definition,) = yaml.safe_load(exported.stdout)["jobs"]
    assert (definition["calendars"], definition["calendar_shift"]) == (["closed"], "previous")
    path = tmp_path / "jobs.yaml"
    path.write_text(exported.stdout)
    again = server.run("apply", "-f", str(path))
    assert again.exit_code == 0, again.stderr
    assert server.json("jobs", "get", job["id"])["version"] == job["version"]  # nothing to change
    unknown = server.run(
        "jobs", "create", "--team", "data", "--name", "other", "--schedule", "0 9 * * *", "--http", HOOK,
        "--calendar", "nothing",
    )  # fmt: skip
    assert unknown.exit_code != 0
    assert "no calendar named 'nothing'" in unknown.stderr
    refused = server.run("calendars", "delete", "data/closed")
    assert refused.exit_code != 0
    assert "payroll" in refused.stderr


def test_export_writes_a_teams_calendars_and_apply_restores_and_creates_them(
    server: Server, tmp_path: Path
) -> None:
    assert (
        server.run("calendars", "create", "data/closed", "--weekday", "sun", "--description", "d").exit_code
        == 0
    )
    made = server.run(
        "jobs", "create", "--team", "data", "--name", "n", "--schedule", "0 9 * * *", "--http", HOOK,
        "--calendar", "closed",
    )  # fmt: skip
    assert made.exit_code == 0, made.stderr
    exported = server.run("export", "--team", "data")
    (section,) = yaml.safe_load_all(exported.stdout)
    assert section["calendars"] == [
        {
            "name": "closed",
            "description": "d",
            "dates": [],
            "ranges": [],
            "weekdays": ["sun"],
            "holidays": None,
        }
    ]
    path = tmp_path / "data.yaml"
    path.write_text(exported.stdout)
    assert server.run("apply", "-f", str(path)).stdout.startswith("No changes")
    server.run("calendars", "update", "data/closed", "--weekday", "sat")
    section["calendars"].append({"name": "new", "dates": ["2027-01-01"]})
    section["jobs"].append({**section["jobs"][0], "name": "m", "calendars": ["new"]})
    path.write_text(yaml.safe_dump(section))
    dry = server.run("apply", "-f", str(path), "--dry-run")
    assert dry.stdout.splitlines()[:3] == [
        "+ create calendar data/new",
        "~ update calendar data/closed",
        "+ create data/m",
    ]
    assert server.json("calendars", "get", "data/closed")["weekdays"] == ["sat"]  # a dry run changes nothing
    applied = server.run("apply", "-f", str(path))
    assert applied.exit_code == 0, applied.stderr
    assert server.json("calendars", "get", "data/closed")["weekdays"] == ["sun"]
    assert server.json("calendars", "get", "data/new")["dates"] == ["2027-01-01"]
    assert server.json("jobs", "get", "data/m")["calendars"] == ["new"]
