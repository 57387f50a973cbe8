"""``cronwheel apply -f jobs.yaml``: declarative, idempotent, with --dry-run and --prune."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from .conftest import Server

HOOK = "https://hooks.example.com/"


def job(name: str, schedule: str = "0 3 * * *", **extra: Any) -> dict[str, Any]:
    return {"name": name, "schedule": schedule, "target": {"type": "http", "url": HOOK + name}, **extra}


def write(path: Path, team: str, jobs: list[dict[str, Any]]) -> str:
    path.write_text(yaml.safe_dump({"team": team, "jobs": jobs}, sort_keys=False))
    return str(path)


def names(server: Server, team: str) -> dict[str, dict[str, Any]]:
    return {j["name"]: j for j in server.json("jobs", "list", "--team", team)["items"]}


def test_apply_creates_then_changes_nothing(server: Server, tmp_path: Path) -> None:
    path = write(tmp_path / "jobs.yaml", "data", [job("a"), job("b", timezone="Europe/Berlin")])
    first = server.run("apply", "-f", path)
    assert first.exit_code == 0, first.stderr
    assert first.stdout.splitlines() == [
        "+ create data/a",
        "+ create data/b",
        "Applied: 2 created, 0 updated, 0 deleted, 0 unchanged.",
    ]
    created = names(server, "data")
    assert set(created) == {"a", "b"}
    second = server.run("apply", "-f", path)
    assert second.exit_code == 0
    assert second.stdout.strip() == f"No changes: 2 job(s) already match {path}."
    assert names(server, "data") == created  # same versions: nothing was written


def test_apply_updates_only_what_changed(server: Server, tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    write(path, "data", [job("a"), job("b", labels={"tier": "gold"})])
    server.run("apply", "-f", str(path))
    before = names(server, "data")
    secret = {"type": "http", "url": HOOK + "b", "headers": {"Authorization": "Bearer xyz"}}
    write(path, "data", [job("a"), job("b", "*/5 * * * *", labels={"tier": "silver"}, target=secret)])
    result = server.run("apply", "-f", str(path))
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [
        "~ update data/b",
        "    schedule: '0 3 * * *' -> '*/5 * * * *'",
        "    target.headers.Authorization: (none) -> (hidden)",
        "    labels.tier: 'gold' -> 'silver'",
        "Applied: 0 created, 1 updated, 0 deleted, 1 unchanged.",
    ]
    assert "xyz" not in result.stdout
    after = names(server, "data")
    assert after["a"]["version"] == before["a"]["version"]
    assert after["b"]["version"] == before["b"]["version"] + 1
    assert after["b"]["schedule"] == "*/5 * * * *"
    assert server.run("apply", "-f", str(path)).stdout.startswith("No changes")


def test_apply_resets_fields_changed_outside_the_file(server: Server, tmp_path: Path) -> None:
    path = write(tmp_path / "jobs.yaml", "data", [job("a")])
    server.run("apply", "-f", path)
    server.run("jobs", "update", "data/a", "--max-attempts", "7")
    result = server.run("apply", "-f", path)
    assert "    retry.max_attempts: 7 -> 1" in result.stdout
    assert names(server, "data")["a"]["retry"]["max_attempts"] == 1


def test_dry_run_changes_nothing(server: Server, tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    write(path, "data", [job("a"), job("old")])
    server.run("apply", "-f", str(path))
    before = names(server, "data")
    write(path, "data", [job("a", "0 9 * * *"), job("new")])
    result = server.run("apply", "-f", str(path), "--prune", "--dry-run")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "+ create data/new",
        "~ update data/a",
        "    schedule: '0 3 * * *' -> '0 9 * * *'",
        "- delete data/old",
        "Dry run: 1 to create, 1 to update, 1 to delete, 0 unchanged; nothing was changed.",
    ]
    assert names(server, "data") == before
    as_json = json.loads(server.run("apply", "-f", str(path), "--prune", "--dry-run", "-o", "json").stdout)
    assert as_json == {
        "dry_run": True,
        "create": ["data/new"],
        "update": [{"job": "data/a", "changes": ["schedule"]}],
        "delete": ["data/old"],
        "unchanged": [],
    }


def test_prune_deletes_only_the_files_teams(server: Server, tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    write(path, "data", [job("a"), job("b")])
    server.run("apply", "-f", str(path))
    server.json(
        "jobs", "create", "--team", "web", "--name", "w", "--schedule", "@daily", "--http", HOOK + "w"
    )
    write(path, "data", [job("a")])
    without_prune = server.run("apply", "-f", str(path))
    assert without_prune.stdout.startswith("No changes")
    assert set(names(server, "data")) == {"a", "b"}
    result = server.run("apply", "-f", str(path), "--prune")
    assert result.exit_code == 0
    assert result.stdout.splitlines() == [
        "- delete data/b",
        "Applied: 0 created, 0 updated, 1 deleted, 1 unchanged.",
    ]
    assert set(names(server, "data")) == {"a"}
    assert set(names(server, "web")) == {"w"}
    assert server.run("apply", "-f", str(path), "--prune").stdout.startswith("No changes")


def test_apply_file_shapes(server: Server, tmp_path: Path) -> None:
    documents = [
        {"team": "ops", **job("one")},
        [{"team": "ops", **job("two")}, {"team": "web", **job("three")}],
    ]
    path = tmp_path / "multi.yaml"
    path.write_text(yaml.safe_dump_all(documents))
    result = server.run("apply", "-f", str(path))
    assert result.exit_code == 0, result.stderr
    assert set(names(server, "ops")) == {"one", "two"}
    assert set(names(server, "web")) == {"three"}
    as_json = tmp_path / "jobs.json"
    as_json.write_text(json.dumps({"team": "ops", "jobs": [job("one"), job("two")]}))
    assert server.run("apply", "-f", str(as_json)).stdout.startswith("No changes")


def test_invalid_file_applies_nothing(server: Server, tmp_path: Path) -> None:
    path = write(
        tmp_path / "jobs.yaml",
        "data",
        [job("good"), job("bad", "0 0 31 2 *"), job("worse", retry={"max_attempts": 0}), job("good")],
    )
    result = server.run("apply", "-f", path)
    assert result.exit_code == 2
    err = result.stderr
    assert "nothing applied" in err
    assert "job 2 (data/bad): invalid schedule: the schedule can never fire" in err
    assert "job 3 (data/worse): retry.max_attempts: Input should be greater than or equal to 1" in err
    assert "job 4 (data/good): data/good appears more than once" in err
    assert names(server, "data") == {}
    broken = tmp_path / "broken.yaml"
    broken.write_text("jobs: [unclosed")
    assert server.run("apply", "-f", str(broken)).exit_code == 2
    assert server.run("apply", "-f", str(tmp_path / "missing.yaml")).exit_code == 2


def test_server_refusal_stops_apply_with_exit_2(server: Server, tmp_path: Path) -> None:
    path = write(
        tmp_path / "jobs.yaml", "data", [job("a", target={"type": "http", "url": "http://10.0.0.1/x"})]
    )
    result = server.run("apply", "-f", path)
    assert result.exit_code == 2
    assert "non-public address" in result.stderr
    assert names(server, "data") == {}


def test_prune_refuses_to_empty_a_team_it_was_not_told_to(server: Server, tmp_path: Path) -> None:
    path = write(tmp_path / "jobs.yaml", "data", [job("a"), job("b")])
    server.run("apply", "-f", path)
    before = names(server, "data")
    empty_section = server.run("apply", "-f", "-", "--prune", input="{team: data, jobs: []}")
    assert empty_section.exit_code == 2
    assert "lists no jobs for team(s) data: --prune would delete every job" in empty_section.stderr
    assert "--team data" in empty_section.stderr
    beside = [{"team": "data", "jobs": []}, {"team": "web", "jobs": [job("w")]}]
    mixed = server.run("apply", "-f", "-", "--prune", input=yaml.safe_dump_all(beside))
    assert mixed.exit_code == 2
    assert "lists no jobs for team(s) data" in mixed.stderr
    empty_file = server.run("apply", "-f", "-", "--prune", input="[]")
    assert empty_file.exit_code == 2
    assert "lists no jobs, so --prune has no team to prune" in empty_file.stderr
    assert names(server, "data") == before
    assert names(server, "web") == {}  # refused whole: web/w was not created either
    assert server.run("apply", "-f", "-", input="[]").stdout.startswith("No changes")  # no --prune: fine


def test_prune_with_team_empties_the_named_team(server: Server, tmp_path: Path) -> None:
    server.run("apply", "-f", write(tmp_path / "data.yaml", "data", [job("a"), job("b")]))
    server.run("apply", "-f", write(tmp_path / "web.yaml", "web", [job("w")]))
    plan = server.run("apply", "-f", "-", "--prune", "--team", "data", "--dry-run", input="[]")
    assert plan.exit_code == 0, plan.stderr
    assert plan.stdout.splitlines() == [
        "- delete data/a",
        "- delete data/b",
        "Dry run: 0 to create, 0 to update, 2 to delete, 0 unchanged; nothing was changed.",
    ]
    done = server.run("apply", "-f", "-", "--prune", "--team", "data", input="{team: data, jobs: []}")
    assert done.exit_code == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "Applied: 0 created, 0 updated, 2 deleted, 0 unchanged."
    assert names(server, "data") == {}
    assert set(names(server, "web")) == {"w"}


def test_team_option_refuses_other_teams_jobs(server: Server, tmp_path: Path) -> None:
    path = write(tmp_path / "jobs.yaml", "web", [job("w")])
    result = server.run("apply", "-f", path, "--prune", "--team", "data")
    assert result.exit_code == 2
    assert "it holds team(s) web, not among --team data" in result.stderr
    assert names(server, "web") == {}
    assert server.run("apply", "-f", path, "--team", "web").exit_code == 0
    assert set(names(server, "web")) == {"w"}
