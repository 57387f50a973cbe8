"""``cronwheel audit list`` against a real server (table, JSON and YAML, with filters), and
``cronwheel audit prune`` straight in a database."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import yaml
from click.testing import CliRunner

from cronwheel.audit import Actor, AuditAction, AuditQuery
from cronwheel.cli import cli
from cronwheel.store.sql import open_store

from .conftest import Server

HOOK = "https://hooks.example.com/nightly"


def _create(server: Server, team: str, name: str) -> None:
    result = server.run(
        "jobs", "create", "--team", team, "--name", name, "--schedule", "0 3 * * *",
        "--http", HOOK, "--header", "X-Token=plain-secret-value",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr


def test_list_shows_who_did_what_in_every_format(server: Server) -> None:
    _create(server, "data", "nightly")
    _create(server, "ops", "backup")
    server.clock.advance(60)
    assert server.run("jobs", "pause", "data/nightly").exit_code == 0

    table = server.run("audit", "list")
    assert table.exit_code == 0, table.stderr
    lines = table.stdout.splitlines()
    assert lines[0].split() == ["AT", "TEAM", "ACTION", "ACTOR", "TARGET", "OUTCOME", "CLIENT"]
    assert "job.pause" in lines[1]
    assert "job nightly" in lines[1]
    assert "cli-tests" in lines[1]
    assert "127.0.0.1" in lines[1]
    assert len(lines) == 4  # newest first: the pause, then the two creates

    listed = server.json("audit", "list", "--team", "data", "--action", "job")["items"]
    assert [(e["action"], e["team"]) for e in listed] == [("job.pause", "data"), ("job.create", "data")]
    assert listed[0]["before"]["paused"] is False
    assert listed[0]["after"]["paused"] is True
    assert "plain-secret-value" not in json.dumps(listed)

    since = server.json("audit", "list", "--since", "2026-03-02T12:00:30Z")["items"]
    assert [e["action"] for e in since] == ["job.pause"]
    assert server.json("audit", "list", "--target", "backup")["items"][0]["team"] == "ops"

    as_yaml = server.run("audit", "list", "--limit", "1", "-o", "yaml")
    assert as_yaml.exit_code == 0, as_yaml.stderr
    document = yaml.safe_load(as_yaml.stdout)
    assert len(document["items"]) == 1
    assert document["next_cursor"]


def test_bad_options_are_refused_with_a_message(server: Server) -> None:
    result = server.run("audit", "list", "--since", "yesterday")
    assert result.exit_code == 2
    assert "--since" in result.stderr
    bad_action = server.run("audit", "list", "--action", "JOB!")
    assert bad_action.exit_code == 2
    assert "action" in bad_action.stderr


def test_prune_deletes_old_entries_in_the_database(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'audit.db'}"
    now = datetime.now(UTC)
    asyncio.run(_write(database, [now - timedelta(days=400), now - timedelta(days=10), now]))
    result = CliRunner().invoke(cli, ["audit", "prune", "--older-than", "365d", "--database-url", database])
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith("deleted 1 audit entries from before ")
    assert len(asyncio.run(_read(database))) == 2
    refused = CliRunner().invoke(
        cli, ["audit", "prune", "--older-than", "forever", "--database-url", database]
    )
    assert refused.exit_code == 2
    assert len(asyncio.run(_read(database))) == 2


async def _write(database: str, instants: list[datetime]) -> None:
    store = await open_store(database)
    try:
        actor = Actor("token", "t1", "ci")
        await store.append_audit([actor.entry(AuditAction.JOB_CREATE, at, "ops") for at in instants])
    finally:
        await store.close()


async def _read(database: str) -> list[object]:
    store = await open_store(database)
    try:
        return list((await store.list_audit(AuditQuery())).items)
    finally:
        await store.close()


def test_the_client_address_is_the_peer_s_own_unless_the_operator_trusts_a_proxy(server: Server) -> None:
    """The real HTTP server (uvicorn, configured as `cronwheel server` configures it) believes
    X-Forwarded-For from no peer unless --forwarded-allow-ips names it: a client on this machine
    cannot write another address into the log."""
    headers = {"Authorization": f"Bearer {server.token}", "X-Forwarded-For": "203.0.113.9"}
    body = {"team": "data", "name": "proxied", "schedule": "@daily", "target": {"type": "http", "url": HOOK}}
    response = httpx.post(f"{server.url}/v1/jobs", json=body, headers=headers)
    assert response.status_code == 201, response.text
    assert server.json("audit", "list", "--target", "proxied")["items"][0]["client"] == "127.0.0.1"


def test_an_actor_without_an_id_is_shown_by_its_name() -> None:
    """The server's own entries (its bootstrap token) have no actor id: not "(None)"."""
    from cronwheel.cli.audit import actor_of

    server = {"actor_kind": "server", "actor_name": "the server itself", "actor_id": None}
    token = {"actor_kind": "token", "actor_name": "ci", "actor_id": "b5785e077127"}
    assert actor_of(server) == "the server itself"
    assert actor_of(token) == "ci (b5785e077127)"
    assert actor_of({"actor_kind": "anonymous", "actor_name": None, "actor_id": None}) == "(anonymous)"
