"""``cronwheel export`` and ``jobs get -o yaml`` against live API servers: what they print is what
``cronwheel apply -f`` takes back unchanged, onto an empty server and onto the server it came from."""

from __future__ import annotations

import importlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from cronwheel.cli.definition import definition_fields
from cronwheel.jobs.service import TargetPolicy
from cronwheel.targets.kinds import KINDS

from .conftest import Server, serve

# every kind of target, so commands and python functions too
POLICY = TargetPolicy(allow_commands=True, python_allow=("myapp.*",), allow_plain_credentials=True)

SECRETS = {
    "data/api-key": "key-9f8e7d",
    "data/db-password": "pw-1a2b3c",
    "ops/grpc-token": "grpc-5e6f",
    "ops/nats-token": "nats-7a8b",
    "ops/kafka-password": "kafka-9c0d",
    "plant/mqtt-password": "mqtt-1e2f",
    "plant/amqp-password": "amqp-3a4b",
}

# written as people write them: defaults left out, labels in no order, several forms of file
DATA = {
    "team": "data",
    "jobs": [
        {
            "name": "nightly",
            "schedule": "30 2 * * *",
            "timezone": "Europe/Berlin",
            "dst_gap": "skip",
            "dst_fold": "both",
            "target": {
                "type": "http",
                "url": "https://hooks.example.com/nightly",
                "method": "PUT",
                "headers": {"Authorization": {"secret": "api-key"}, "X-Team": "data"},
                "expected_status": [200, 202],
            },
            "payload": {"dataset": "orders", "days": [1, 2]},
            "timeout_s": 120,
            "retry": {"max_attempts": 4, "initial_delay_s": 5, "multiplier": 3, "max_delay_s": 600},
            "misfire": {"policy": "run_once"},
            "overlap": "forbid",
            "jitter_s": 45.5,
            "labels": {"tier": "gold", "owner": "alice"},
            "retention": {"keep_days": 30},
            "start_at": "2027-01-01T00:00:00+01:00",
            "end_at": "2027-12-31T23:59:59Z",
        },
        {
            "name": "cleanup",
            "schedule": "H 4 * * SUN",
            "target": {
                "type": "command",
                "argv": ["/usr/local/bin/cleanup", "--older-than", "30d"],
                "env": {"LOG_LEVEL": "info", "DB_PASSWORD": {"secret": "db-password"}},
                "cwd": "/srv",
            },
            "misfire": {"policy": "catch_up", "max_catch_up": 3},
            "retention": {"keep_runs": 100},
        },
        {
            "name": "digest",
            "schedule": "0 8 * * MON-FRI",
            "target": {"type": "python", "function": "myapp.mail:digest"},
        },
        {
            "name": "migrate-once",
            "schedule": "@at 2031-01-01T03:00:00+01:00",
            "target": {"type": "command", "argv": ["/usr/local/bin/migrate"]},
            "delete_after_success": True,
        },
    ],
}
OPS = [
    {
        "team": "ops",
        "name": "sync",
        "schedule": "15 1 * * *",
        "timezone": "America/New_York",
        "dst_gap": "shift",
        "dst_fold": "first",
        "target": {
            "type": "grpc",
            "address": "orders.example.com:50051",
            "method": "shop.v1.Orders/Sync",
            "tls": True,
            "metadata": {"authorization": {"secret": "grpc-token"}, "x-env": "prod"},
        },
        "overlap": "replace",
    },
    {
        "team": "ops",
        "name": "events",
        "schedule": "*/10 * * * *",
        "target": {
            "type": "nats",
            "url": "nats://nats.example.com:4222",
            "subject": "ops.events",
            "jetstream": True,
            "token": {"secret": "nats-token"},
        },
        "queue": "default",
    },
    {
        "team": "ops",
        "name": "audit-feed",
        "schedule": "@hourly",
        "target": {
            "type": "kafka",
            "bootstrap_servers": ["kafka-1.example.com:9092", "kafka-2.example.com:9092"],
            "topic": "audit.feed",
            "key": "ops",
            "headers": {"source": "cronwheel"},
            "tls": True,
            "sasl_mechanism": "SCRAM-SHA-256",
            "username": "svc",
            "password": {"secret": "kafka-password"},
        },
        "description": "Audit events to Kafka",
    },
]
PLANT = """\
team: plant
name: report
schedule: "*/5 * * * *"
target: {type: mqtt, url: "mqtts://mqtt.example.com:8883", topic: plant/3/reports, qos: 2, retain: true,
         username: reporter, password: {secret: mqtt-password}}
---
team: plant
name: restock
schedule: "0 6 * * *"
timezone: Asia/Tokyo
target:
  type: rabbitmq
  url: amqps://rabbit.example.com:5671/plant
  exchange: orders
  routing_key: restock.daily
  headers: {x-origin: plant}
  username: {secret: amqp-password}
  password: {secret: amqp-password}
labels: {site: osaka}
"""


@pytest.fixture
def two_servers(tmp_path: Path, store_templates: Path) -> Iterator[tuple[Server, Server]]:
    """A server with jobs of every kind, and an empty one; both with the same team secrets."""
    with (
        serve(tmp_path / "first", store_templates, POLICY) as first,
        serve(tmp_path / "empty", store_templates, POLICY) as empty,
    ):
        for running in (first, empty):
            for ref, value in SECRETS.items():
                done = running.run("secrets", "set", ref, input=value + "\n")
                assert done.exit_code == 0, done.stderr
        _fill(first, tmp_path)
        yield first, empty


def _fill(server: Server, tmp_path: Path) -> None:
    for name, text in (
        ("data.yaml", yaml.safe_dump(DATA)),
        ("ops.json", json.dumps(OPS)),
        ("plant.yaml", PLANT),
    ):
        (tmp_path / name).write_text(text)
        done = server.run("apply", "-f", str(tmp_path / name))
        assert done.exit_code == 0, done.stderr
    created = server.run(
        "jobs", "create", "--team", "data", "--name", "ping", "--schedule", "* * * * *",
        "--http", "https://hooks.example.com/ping", "--secret-header", "X-Api-Key=api-key",
        "--label", "kind=probe",
    )  # fmt: skip
    assert created.exit_code == 0, created.stderr
    for job in ("data/ping", "ops/events"):  # edited: versions above 1
        assert server.run("jobs", "update", job, "--max-attempts", "2").exit_code == 0
    for job in ("data/cleanup", "plant/restock"):
        assert server.run("jobs", "pause", job, "--note", "maintenance").exit_code == 0


def _export(server: Server, *args: str) -> str:
    done = server.run("export", *args)
    assert done.exit_code == 0, done.stderr
    return done.stdout


def _plan(server: Server, path: Path, *args: str) -> dict[str, Any]:
    done = server.run("apply", "-f", str(path), *args, "-o", "json")
    assert done.exit_code == 0, done.stderr
    plan: dict[str, Any] = json.loads(done.stdout)
    return plan


def test_an_export_applies_to_an_empty_server_and_exports_the_same(
    two_servers: tuple[Server, Server], tmp_path: Path
) -> None:
    first, empty = two_servers
    exported = _export(first)
    (tmp_path / "export.yaml").write_text(exported)

    restored = _plan(empty, tmp_path / "export.yaml")
    assert len(restored["create"]) == 10
    assert _export(empty) == exported
    assert _export(empty, "-o", "json") == _export(first, "-o", "json")

    again = _plan(first, tmp_path / "export.yaml", "--prune")
    assert (again["create"], again["update"], again["delete"]) == ([], [], [])
    assert len(again["unchanged"]) == 10
    assert first.json("jobs", "get", "data/cleanup")["paused"] is True  # apply leaves pause alone


def test_an_export_holds_every_kind_in_order_with_references_only(two_servers: tuple[Server, Server]) -> None:
    first, _ = two_servers
    exported = _export(first)
    documents = list(yaml.safe_load_all(exported))
    assert [doc["team"] for doc in documents] == ["data", "ops", "plant"]
    assert [[job["name"] for job in doc["jobs"]] for doc in documents] == [
        ["cleanup", "digest", "migrate-once", "nightly", "ping"],
        ["audit-feed", "events", "sync"],
        ["report", "restock"],
    ]
    jobs = {job["name"]: job for doc in documents for job in doc["jobs"]}
    assert {job["target"]["type"] for job in jobs.values()} == set(KINDS)
    for job in jobs.values():  # every defined field, defaults too, none of the server's
        assert list(job) == [name for name in definition_fields() if name != "team"]
    nightly = jobs["nightly"]
    assert nightly["labels"] == {"owner": "alice", "tier": "gold"}
    assert list(nightly["labels"]) == ["owner", "tier"]
    assert nightly["target"]["headers"] == {"Authorization": {"secret": "api-key"}, "X-Team": "data"}
    assert nightly["start_at"] == "2026-12-31T23:00:00Z"
    assert jobs["digest"]["timeout_s"] == 60.0
    assert jobs["digest"]["retention"] is None
    assert jobs["migrate-once"]["delete_after_success"] is True
    assert jobs["digest"]["delete_after_success"] is False
    assert jobs["ping"]["retry"]["max_attempts"] == 2
    assert not any(value in exported for value in SECRETS.values())


def test_jobs_get_yaml_applies_back_unchanged(two_servers: tuple[Server, Server], tmp_path: Path) -> None:
    first, empty = two_servers
    for job in ("data/nightly", "data/cleanup", "ops/audit-feed", "ops/events", "ops/sync", "plant/restock"):
        got = first.run("jobs", "get", job, "-o", "yaml")
        assert got.exit_code == 0, got.stderr
        path = tmp_path / "job.yaml"
        path.write_text(got.stdout)
        assert yaml.safe_load(got.stdout)["version"] >= 1  # the whole object, the server's fields too

        same = first.run("apply", "-f", str(path))
        assert same.exit_code == 0, same.stderr
        assert same.stdout.startswith("No changes: 1 job(s) already match")
        assert same.stderr == ""

        created = empty.run("apply", "-f", str(path))
        assert created.exit_code == 0, created.stderr
        assert created.stdout.splitlines()[0] == f"+ create {job}"
        state = "paused: true, the server's job will be created active"
        assert (state in created.stderr) is (job in ("data/cleanup", "plant/restock"))
    assert _export(empty, "--team", "ops") == _export(first, "--team", "ops")


def test_the_api_object_as_json_applies_and_its_server_fields_are_never_sent(
    two_servers: tuple[Server, Server], tmp_path: Path
) -> None:
    first, _ = two_servers
    job = first.json("jobs", "get", "ops/events")
    stale = {**job, "id": "0" * 26, "version": 1, "paused": True, "next_run_at": None, "late": True}
    (tmp_path / "events.json").write_text(json.dumps(stale))
    plan = _plan(first, tmp_path / "events.json")
    assert plan["unchanged"] == ["ops/events"]
    assert first.json("jobs", "get", "ops/events") == job  # nothing written, not even the version

    edited = {**stale, "schedule": "*/20 * * * *"}
    (tmp_path / "events.json").write_text(json.dumps(edited))
    done = first.run("apply", "-f", str(tmp_path / "events.json"))
    assert done.exit_code == 0, done.stderr
    assert "schedule: '*/10 * * * *' -> '*/20 * * * *'" in done.stdout
    assert "note: ops/events: the file says paused: true, the server's job is active" in done.stderr
    after = first.json("jobs", "get", "ops/events")
    assert (after["id"], after["version"], after["paused"]) == (job["id"], job["version"] + 1, False)


def test_a_masked_credential_is_exported_with_a_note_and_never_applied(
    server: Server, tmp_path: Path
) -> None:
    created = server.run(
        "jobs", "create", "--team", "data", "--name", "legacy", "--schedule", "@daily",
        "--http", "https://hooks.example.com/legacy", "--header", "Authorization=Bearer s3cr3t-v4lue",
    )  # fmt: skip
    assert created.exit_code == 0, created.stderr
    hook = "https://hooks.example.com/signed?token=t0k3n-v4lue"
    linked = server.run(
        "jobs", "create", "--team", "data", "--name", "linked", "--schedule", "@daily", "--http", hook
    )
    assert linked.exit_code == 0, linked.stderr
    reader = server.json("tokens", "create", "--name", "ro", "--team", "data", "--scope", "read")["token"]
    env = {"CRONWHEEL_URL": server.url, "CRONWHEEL_TOKEN": reader}
    masked = server.bare("export", env=env)
    assert masked.exit_code == 0, masked.stderr
    assert "s3cr3t-v4lue" not in masked.stdout
    assert "t0k3n-v4lue" not in masked.stdout
    assert "note: data/legacy: target.headers.Authorization: '***' is how the server shows" in masked.stderr
    assert "note: data/linked: target.url: '***' is how the server shows" in masked.stderr
    (tmp_path / "masked.yaml").write_text(masked.stdout)

    refused = server.run("apply", "-f", str(tmp_path / "masked.yaml"))
    assert refused.exit_code == 2
    assert "nothing applied" in refused.stderr
    for line in (
        "job 1 (data/legacy): target.headers.Authorization: '***' is how the server shows",
        "job 2 (data/linked): target.url: '***' is how the server shows",
    ):
        assert line in refused.stderr
    headers = server.json("jobs", "get", "data/legacy")["target"]["headers"]
    assert headers == {"Authorization": "Bearer s3cr3t-v4lue"}
    assert server.json("jobs", "get", "data/linked")["target"]["url"] == hook

    writer = _export(server)  # the write scope reads the value the job holds, so it round-trips
    assert "Bearer s3cr3t-v4lue" in writer
    assert hook in writer


def test_export_reads_every_page(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    # the module (``cronwheel.cli.export`` as an attribute is the command)
    monkeypatch.setattr(importlib.import_module("cronwheel.cli.export"), "PAGE", 2)
    for team, name in (("b", "y"), ("a", "z"), ("b", "x"), ("a", "w"), ("c", "v")):
        done = server.run(
            "jobs", "create", "--team", team, "--name", name, "--schedule", "@daily",
            "--http", f"https://hooks.example.com/{name}",
        )  # fmt: skip
        assert done.exit_code == 0, done.stderr
    every = [
        (doc["team"], [job["name"] for job in doc["jobs"]]) for doc in yaml.safe_load_all(_export(server))
    ]
    assert every == [("a", ["w", "z"]), ("b", ["x", "y"]), ("c", ["v"])]
    named = list(yaml.safe_load_all(_export(server, "--team", "c", "--team", "a", "--team", "none")))
    assert [(doc["team"], len(doc["jobs"])) for doc in named] == [("a", 2), ("c", 1), ("none", 0)]


def test_an_export_of_nothing_applies_as_nothing(server: Server, tmp_path: Path) -> None:
    assert _export(server).strip() == "[]"
    (tmp_path / "none.yaml").write_text(_export(server))
    done = server.run("apply", "-f", str(tmp_path / "none.yaml"))
    assert done.exit_code == 0, done.stderr
    assert done.stdout.startswith("No changes: 0 job(s)")
