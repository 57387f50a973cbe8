"""``cronwheel tokens`` and ``cronwheel config`` against a real server: a token is printed once,
listed by id, revoked; contexts pick the server and token; a 401 says what to do."""

from __future__ import annotations

import asyncio
import json
import stat
from datetime import UTC, datetime, timedelta
from pathlib import Path

from click.testing import CliRunner

from cronwheel.audit import AuditEntry, AuditQuery
from cronwheel.auth.tokens import ApiToken
from cronwheel.cli import cli
from cronwheel.store import TokenQuery
from cronwheel.store.sql import open_store

from .conftest import Server


def test_create_list_and_revoke_a_token(server: Server) -> None:
    made = server.json(
        "tokens", "create", "--name", "ci", "--team", "data", "--scope", "read", "--expires-in", "90d"
    )
    assert made["token"].startswith(f"cw_{made['id']}_")
    expires = datetime.fromisoformat(made["expires_at"])
    assert timedelta(days=89) < expires - datetime.now(UTC) <= timedelta(days=90)

    env = {"CRONWHEEL_URL": server.url, "CRONWHEEL_TOKEN": made["token"]}
    assert server.bare("jobs", "list", env=env).exit_code == 0
    refused = server.bare("jobs", "create", "--team", "data", "--name", "x", "--schedule", "@daily",
                          "--http", "https://example.com/", env=env)  # fmt: skip
    assert refused.exit_code == 2
    assert "lacks the 'write' scope" in refused.stderr

    table = server.run("tokens", "list")
    assert table.exit_code == 0
    assert made["id"] in table.stdout
    assert made["token"] not in table.stdout
    assert server.run("tokens", "revoke", made["id"]).stdout == f"revoked {made['id']}\n"
    after = server.bare("jobs", "list", env=env)
    assert after.exit_code == 2
    assert f"token {made['id']} is revoked" in after.stderr
    assert "(the token from CRONWHEEL_TOKEN was refused)" in after.stderr
    listed = server.json("tokens", "list", "--all")["items"]
    assert [t["state"] for t in listed if t["id"] == made["id"]] == ["revoked"]


def test_the_table_shows_the_token_once_with_a_warning(server: Server) -> None:
    result = server.run("tokens", "create", "--name", "deploy", "--all-teams", "--scope", "trigger")
    assert result.exit_code == 0, result.stderr
    assert "(every team)" in result.stdout
    assert "shown once" in result.stdout
    assert sum(line.startswith("cw_") for line in result.stdout.splitlines()) == 1


def test_token_options_are_checked_before_anything_is_sent(server: Server) -> None:
    for args in (
        ["--name", "x", "--scope", "read"],  # no team
        ["--name", "x", "--team", "data", "--all-teams", "--scope", "read"],
        ["--name", "x", "--team", "data"],  # no scope
        ["--team", "data", "--scope", "read"],  # no name
        ["--name", "x", "--team", "data", "--scope", "read", "--expires-in", "soon"],
        [
            "--name",
            "x",
            "--team",
            "data",
            "--scope",
            "read",
            "--expires-in",
            "1d",
            "--expires-at",
            "2027-01-01T00:00:00Z",
        ],
        ["--bootstrap", "--team", "data"],
    ):
        result = server.run("tokens", "create", *args)
        assert result.exit_code == 2, (args, result.output)
    assert len(server.json("tokens", "list")["items"]) == 1  # the tests' own admin token only


def test_without_a_token_the_cli_says_how_to_give_one(server: Server) -> None:
    result = server.run("jobs", "list", token=False)
    assert result.exit_code == 2
    assert "Unauthenticated (401)" in result.stderr
    assert "no token was sent: pass --token, set CRONWHEEL_TOKEN, or add a context" in result.stderr


def test_contexts_pick_the_server_and_token(server: Server, tmp_path: Path) -> None:
    token_file = tmp_path / "admin.token"
    token_file.write_text(server.token + "\n")
    assert (
        server.bare(
            "config", "set-context", "here", "--url", server.url, "--token-file", str(token_file)
        ).exit_code
        == 0
    )
    assert server.bare("config", "set-context", "nowhere", "--url", "http://127.0.0.1:9").exit_code == 0
    listed = server.bare("config", "get-contexts", "-o", "json")
    contexts = {row["name"]: row for row in json.loads(listed.stdout)}
    assert contexts["here"] == {"name": "here", "current": True, "url": server.url, "token": str(token_file)}
    assert contexts["nowhere"]["current"] is False

    assert server.bare("jobs", "list").exit_code == 0  # the current context: this server, its token
    assert server.bare("config", "use-context", "nowhere").exit_code == 0
    assert server.bare("jobs", "list").exit_code == 1  # nothing listens there
    assert server.bare("jobs", "list", "--context", "here").exit_code == 0
    assert server.bare("jobs", "list", env={"CRONWHEEL_CONTEXT": "here"}).exit_code == 0
    missing = server.bare("jobs", "list", "--context", "staging")
    assert missing.exit_code == 2
    assert "no context named 'staging'" in missing.stderr

    config = server.home / "config.yaml"
    assert stat.S_IMODE(config.stat().st_mode) == 0o600
    assert server.token not in config.read_text()  # kept as the file's path
    assert server.bare("config", "delete-context", "nowhere").exit_code == 0
    assert server.bare("config", "use-context", "nowhere").exit_code == 2


def test_a_context_may_keep_its_token_read_from_stdin(server: Server) -> None:
    saved = server.bare(
        "config", "set-context", "here", "--url", server.url, "--token-stdin", "--use", input=server.token
    )
    assert saved.exit_code == 0, saved.stderr
    shown = server.bare("config", "get-contexts")
    assert server.token not in shown.stdout
    assert "(in the config file)" in shown.stdout
    assert server.bare("jobs", "list").exit_code == 0


def test_bootstrap_makes_an_admin_token_in_the_database(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'fresh.db'}"
    result = CliRunner().invoke(
        cli, ["tokens", "create", "--bootstrap", "--database-url", database, "--name", "ops"]
    )
    assert result.exit_code == 0, result.stderr
    token = result.stdout.strip()
    assert token.startswith("cw_")
    assert "admin token of every team 'ops'" in result.stderr
    (stored,) = asyncio.run(_tokens(database))
    assert (stored.name, stored.team, sorted(stored.scopes)) == ("ops", None, ["admin"])
    assert token not in repr(stored)
    (made,) = asyncio.run(_audit(database))  # the audit log says where the first token came from
    assert (made.action, made.actor_kind, made.target_id, made.team) == (
        "token.create",
        "server",
        stored.id,
        None,
    )


async def _audit(database: str) -> list[AuditEntry]:
    store = await open_store(database)
    try:
        return (await store.list_audit(AuditQuery())).items
    finally:
        await store.close()


async def _tokens(database: str) -> list[ApiToken]:
    store = await open_store(database)
    try:
        return (await store.list_tokens(TokenQuery())).items
    finally:
        await store.close()


def test_quiet_prints_the_token_alone(server: Server) -> None:
    result = server.run("tokens", "create", "--name", "ci", "--team", "data", "--scope", "read", "-q")
    assert result.exit_code == 0, result.stderr
    token = result.stdout.removesuffix("\n")
    assert "\n" not in token
    env = {"CRONWHEEL_URL": server.url, "CRONWHEEL_TOKEN": token}
    assert server.bare("jobs", "list", env=env).exit_code == 0  # the one line is the token
    listed = server.json("tokens", "list")["items"]
    assert [t["name"] for t in listed if token.startswith(f"cw_{t['id']}_")] == ["ci"]
    both = server.run(
        "tokens", "create", "--name", "x", "--team", "data", "--scope", "read", "-q", "-o", "json"
    )
    assert both.exit_code == 2
    assert "-q prints the token alone: it does not go with -o json" in both.stderr


def test_quiet_bootstrap_prints_the_token_alone(tmp_path: Path) -> None:
    database = f"sqlite:///{tmp_path / 'fresh.db'}"
    result = CliRunner().invoke(
        cli, ["tokens", "create", "--bootstrap", "--database-url", database, "--quiet"]
    )
    assert result.exit_code == 0, result.output
    assert result.stderr == ""
    assert result.stdout.startswith("cw_")
    assert result.stdout.count("\n") == 1
