"""``cronwheel secrets ...`` against a live API server, and secret references in ``jobs`` and
``apply``: values go in through standard input and never come out; a job's plain values move
into secrets with ``adopt``; the local key file grows with ``add-key``."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from cronwheel.cli import cli
from cronwheel.secrets.crypto import Sealed, unseal
from cronwheel.secrets.keys import parse_keys, read_key_file
from cronwheel.store.sql import open_store

from .conftest import SECRET_KEYS, Server

VALUE = "sk_live_cli-7c2b-token-9911"
HOOK = "https://hooks.example.com/nightly"


def set_secret(server: Server, ref: str, value: str = VALUE) -> str:
    result = server.run("secrets", "set", ref, input=value + "\n")
    assert result.exit_code == 0, result.stderr
    assert value not in result.output
    return result.stdout


def create(server: Server, *flags: str) -> dict[str, Any]:
    job: dict[str, Any] = server.json(
        "jobs",
        "create",
        "--team",
        "data",
        "--name",
        "nightly",
        "--schedule",
        "0 3 * * *",
        "--http",
        HOOK,
        *flags,
    )
    return job


def test_set_from_stdin_list_replace_delete(server: Server) -> None:
    assert set_secret(server, "data/api-key") == "created secret data/api-key (key k1)\n"
    assert set_secret(server, "data/api-key", VALUE + "2") == "replaced secret data/api-key (key k1)\n"
    listed = server.run("secrets", "list", "data")
    assert listed.exit_code == 0
    assert listed.stdout.splitlines()[0].split() == ["TEAM", "NAME", "KEY", "ID", "CREATED", "UPDATED"]
    assert listed.stdout.splitlines()[1].split()[:3] == ["data", "api-key", "k1"]
    as_json = server.json("secrets", "list", "data")
    assert [item["name"] for item in as_json["items"]] == ["api-key"]
    assert "value" not in as_json["items"][0]
    deleted = server.run("secrets", "delete", "data/api-key")
    assert deleted.stdout == "deleted secret data/api-key\n"
    again = server.run("secrets", "delete", "data/api-key")
    assert again.exit_code == 2
    assert "no secret named 'api-key'" in again.stderr
    assert server.run("secrets", "list", "data").stdout == "no secrets\n"


async def stored_value(server: Server, team: str, name: str) -> str:
    """The value the server stored, opened with its keys (through a store of this test's own:
    the server's belongs to its thread's event loop)."""
    store = await open_store(server.store.engine.url.render_as_string(hide_password=False))
    try:
        stored = (await store.get_secrets(team, [name]))[name]
    finally:
        await store.close()
    return unseal(SECRET_KEYS, team, name, Sealed(stored.key_id, stored.value))


async def test_one_trailing_newline_is_dropped_and_nothing_else(server: Server) -> None:
    for given, kept in [("abc\n", "abc"), ("abc\r\n", "abc"), ("abc\n\n", "abc\n"), ("  abc  ", "  abc  ")]:
        result = server.run("secrets", "set", "data/x", input=given)
        assert result.exit_code == 0
        assert await stored_value(server, "data", "x") == kept


def test_bad_names_and_refused_values_exit_2_without_echo(server: Server) -> None:
    bad = server.run("secrets", "set", "data", input="x")
    assert bad.exit_code == 2
    assert "expected TEAM/NAME" in bad.stderr
    refused = server.run("secrets", "set", "data/webhook-signing", input=VALUE)
    assert refused.exit_code == 2
    assert "must start with whsec_" in refused.stderr
    assert VALUE not in refused.output


def test_a_new_signing_secret_is_generated_stored_and_shown_once(server: Server) -> None:
    result = server.run("secrets", "set", "data/webhook-signing", "--new-signing-secret")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "created secret data/webhook-signing (key k1)\n"
    secret = result.stderr.splitlines()[0]
    assert secret.startswith("whsec_")
    assert "shown once" in result.stderr


def test_jobs_refer_to_secrets_by_flag_and_show_them(server: Server) -> None:
    missing = server.run(
        "jobs", "create", "--team", "data", "--name", "nightly", "--schedule", "0 3 * * *", "--http", HOOK,
        "--secret-header", "Authorization=api-key",
    )  # fmt: skip
    assert missing.exit_code == 2
    assert (
        "target.headers.Authorization refers to secret 'api-key', which team 'data' does not have"
        in missing.stderr
    )
    set_secret(server, "data/api-key")
    set_secret(server, "data/hook-signing", "whsec_" + "A" * 32)
    job = create(
        server,
        "--secret-header",
        "Authorization=api-key",
        "--header",
        "X-Env=prod",
        "--signing-secret",
        "hook-signing",
    )
    assert job["target"]["headers"] == {"X-Env": "prod", "Authorization": {"secret": "api-key"}}
    assert job["target"]["signing_secret"] == {"secret": "hook-signing"}
    shown = server.run("jobs", "get", "data/nightly").stdout
    assert "secrets:     Authorization={secret: api-key} signed with {secret: hook-signing}" in shown
    clear = (
        "in clear:    target.headers.X-Env (held in clear in the job; `cronwheel secrets adopt data/nightly`)"
    )
    assert clear in shown
    usage = server.run("jobs", "create", "--python", "myapp.x:y", "--secret-header", "A=b")
    assert usage.exit_code == 2
    assert "go with --http" in usage.stderr


async def test_adopt_moves_plain_values_into_secrets(server: Server) -> None:
    create(server, "--header", f"Authorization=Bearer {VALUE}", "--header", "X-Env=prod")
    dry = server.run("secrets", "adopt", "data/nightly", "--dry-run")
    assert dry.stdout.splitlines() == [
        "would move target.headers.Authorization -> secret data/nightly.authorization",
        "would move target.headers.X-Env -> secret data/nightly.x-env",
    ]
    assert server.json("secrets", "list", "data")["items"] == []
    moved = server.run("secrets", "adopt", "data/nightly", "--field", "target.headers.Authorization")
    assert moved.exit_code == 0, moved.stderr
    assert moved.stdout == "moved target.headers.Authorization -> secret data/nightly.authorization\n"
    assert VALUE not in moved.output
    job = server.json("jobs", "get", "data/nightly")
    assert job["target"]["headers"] == {"Authorization": {"secret": "nightly.authorization"}, "X-Env": "prod"}
    assert job["plain_values"] == ["target.headers.X-Env"]
    assert job["version"] == 2
    assert [s["name"] for s in server.json("secrets", "list", "data")["items"]] == ["nightly.authorization"]
    assert await stored_value(server, "data", "nightly.authorization") == f"Bearer {VALUE}"
    # an existing secret of the chosen name is never overwritten: nothing changes
    set_secret(server, "data/nightly.x-env", "someone else's")
    taken = server.run("secrets", "adopt", "data/nightly")
    assert taken.exit_code == 2
    assert "already has secret(s) nightly.x-env: nothing was changed" in taken.stderr
    assert server.json("jobs", "get", "data/nightly")["version"] == 2
    unknown = server.run("secrets", "adopt", "data/nightly", "--field", "target.headers.Authorization")
    assert unknown.exit_code == 2
    assert "not a plain value of the job" in unknown.stderr


def test_adopt_of_a_job_without_plain_values_changes_nothing(server: Server) -> None:
    create(server)
    result = server.run("secrets", "adopt", "data/nightly")
    assert result.stdout == "data/nightly holds no plain values: nothing to adopt\n"
    assert server.json("jobs", "get", "data/nightly")["version"] == 1


async def test_adopt_notifications_moves_plain_channel_urls_into_secrets(
    server: Server, tmp_path: Path
) -> None:
    slack = f"https://hooks.slack.com/services/T000/B000/{VALUE}"
    hook = f"https://hooks.example.com/cw?token={VALUE}"
    rules = [{"conditions": ["failure"], "channels": [
        {"type": "webhook", "url": HOOK}, {"type": "slack", "url": slack}, {"type": "webhook", "url": hook},
        {"type": "email", "to": ["ops@example.com"]}]}]  # fmt: skip
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump(rules))
    assert server.run("notifications", "set", "--team", "data", str(path)).exit_code == 0  # allowed here
    dry = server.run("secrets", "adopt-notifications", "--team", "data", "--dry-run")
    assert dry.exit_code == 0, dry.stderr
    assert dry.stdout.splitlines() == [
        "would move rules.0.channels.1.url -> secret data/notify.0.1",
        "would move rules.0.channels.2.url -> secret data/notify.0.2",
    ]
    assert server.json("secrets", "list", "data")["items"] == []
    moved = server.run("secrets", "adopt-notifications", "--team", "data")
    assert moved.exit_code == 0, moved.stderr
    assert VALUE not in moved.output
    channels = server.json("notifications", "get", "--team", "data")["rules"][0]["channels"]
    assert [channel.get("url") for channel in channels] == [
        HOOK,
        {"secret": "notify.0.1"},
        {"secret": "notify.0.2"},
        None,
    ]
    assert await stored_value(server, "data", "notify.0.1") == slack
    assert await stored_value(server, "data", "notify.0.2") == hook
    shown = server.run("notifications", "get", "--team", "data")
    assert "slack:(secret notify.0.1)" in shown.stdout
    again = server.run("secrets", "adopt-notifications", "--team", "data")
    assert again.stdout == "the rules of team data hold no plain credential URLs: nothing to adopt\n"
    create(server)
    path.write_text(
        yaml.safe_dump([{"conditions": ["failure"], "channels": [{"type": "slack", "url": slack}]}])
    )
    assert server.run("notifications", "set", "--job", "data/nightly", str(path)).exit_code == 0
    set_secret(server, "data/nightly.notify.0.0", "someone else's")
    taken = server.run("secrets", "adopt-notifications", "--job", "data/nightly")
    assert taken.exit_code == 2
    assert "already has secret(s) nightly.notify.0.0: nothing was changed" in taken.stderr
    assert (
        server.json("notifications", "get", "--job", "data/nightly")["rules"][0]["channels"][0]["url"]
        == slack
    )
    assert server.run("secrets", "delete", "data/nightly.notify.0.0").exit_code == 0
    job = server.run("secrets", "adopt-notifications", "--job", "data/nightly")
    assert job.stdout == "moved rules.0.channels.0.url -> secret data/nightly.notify.0.0\n"
    assert await stored_value(server, "data", "nightly.notify.0.0") == slack


def test_reencrypt_reports_what_it_did(server: Server) -> None:
    set_secret(server, "data/api-key")
    result = server.run("secrets", "reencrypt")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == "re-encrypted 0 secret(s) under key k1 (0 set meanwhile, already current)\n"
    assert json.loads(server.run("secrets", "reencrypt", "-o", "json").stdout)["failed"] == []


def test_apply_shows_references_and_hides_plain_values(server: Server, tmp_path: Path) -> None:
    set_secret(server, "data/a")
    set_secret(server, "data/b")

    def write(secret: str) -> str:
        target = {
            "type": "http",
            "url": HOOK,
            "headers": {"Authorization": {"secret": secret}, "X-Plain": secret},
        }
        spec = {"team": "data", "jobs": [{"name": "nightly", "schedule": "0 3 * * *", "target": target}]}
        (tmp_path / "jobs.yaml").write_text(yaml.safe_dump(spec))
        return str(tmp_path / "jobs.yaml")

    assert server.run("apply", "-f", write("a")).exit_code == 0
    plan = server.run("apply", "-f", write("b"), "--dry-run")
    assert plan.stdout.splitlines()[:3] == [
        "~ update data/nightly",
        "    target.headers.Authorization: {secret: a} -> {secret: b}",
        "    target.headers.X-Plain: (hidden) -> (hidden)",
    ]


# -- keys ---------------------------------------------------------------------------------------------


def test_add_key_grows_the_key_file_and_prints_no_key(tmp_path: Path) -> None:
    path = tmp_path / "keys"
    runner = CliRunner()
    first = runner.invoke(cli, ["secrets", "add-key", "--key-file", str(path)])
    assert first.exit_code == 0, first.output
    ring = read_key_file(path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    second = runner.invoke(cli, ["secrets", "add-key", "--key-file", str(path)])
    grown = read_key_file(path)
    assert grown.ids[0] == ring.newest.id
    assert len(grown.ids) == 2
    assert second.output.startswith(f"added key {grown.newest.id} to {path}; restart the workers")
    for key_id in grown.ids:
        key = grown.get(key_id)
        assert key is not None
        assert key.material.hex() not in first.output + second.output
    embedded = runner.invoke(cli, ["secrets", "add-key", "--database-url", f"sqlite:///{tmp_path / 'c.db'}"])
    assert embedded.exit_code == 0
    assert (tmp_path / "c.db.keys").exists()
    printed = runner.invoke(cli, ["secrets", "add-key", "--stdout"])
    assert len(parse_keys(printed.output, "stdout").ids) == 1
    cluster = runner.invoke(cli, ["secrets", "add-key", "--database-url", "postgresql://db/cron"])
    assert cluster.exit_code == 2
    assert "give --key-file" in cluster.output
