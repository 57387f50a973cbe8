"""``jobs create --nats/--mqtt`` and ``apply -f`` with broker targets, against a live API server:
the shapes sent, credentials only as secret references, refusals naming the field."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from .conftest import Server


def set_secret(server: Server, ref: str, value: str) -> None:
    result = server.run("secrets", "set", ref, input=value + "\n")
    assert result.exit_code == 0, result.stderr


def test_create_a_nats_target_with_a_token_secret(server: Server) -> None:
    set_secret(server, "data/nats-token", "tok-123456")
    result = server.run(
        "jobs", "create", "--team", "data", "--name", "export", "--schedule", "0 * * * *",
        "--nats", "nats://nats.example.com:4222", "--subject", "exports.hourly", "--jetstream",
        "--broker-token-secret", "nats-token",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert "nats nats://nats.example.com:4222 subject exports.hourly (jetstream)" in result.stdout
    assert "token={secret: nats-token}" in result.stdout
    job = server.json("jobs", "get", "data/export")
    assert job["target"] == {
        "type": "nats",
        "url": "nats://nats.example.com:4222",
        "subject": "exports.hourly",
        "jetstream": True,
        "headers": {},
        "user": None,
        "password": None,
        "token": {"secret": "nats-token"},
    }
    assert job["plain_values"] == []
    assert "tok-123456" not in result.stdout


def test_create_an_mqtt_target_with_a_password_secret(server: Server) -> None:
    set_secret(server, "plant/mqtt-password", "pw-abcdef")
    job = server.json(
        "jobs", "create", "--team", "plant", "--name", "report", "--schedule", "*/5 * * * *",
        "--mqtt", "mqtts://mqtt.example.com:8883", "--topic", "plant/3/reports", "--qos", "2", "--retain",
        "--broker-user", "reporter", "--broker-password-secret", "mqtt-password",
    )  # fmt: skip
    assert job["target"] == {
        "type": "mqtt",
        "url": "mqtts://mqtt.example.com:8883",
        "topic": "plant/3/reports",
        "qos": 2,
        "retain": True,
        "username": "reporter",
        "password": {"secret": "mqtt-password"},
    }
    view = server.run("jobs", "get", "plant/report")
    assert "mqtt mqtts://mqtt.example.com:8883 topic plant/3/reports (qos 2, retain)" in view.stdout


def test_defaults_and_misplaced_flags(server: Server) -> None:
    job = server.json(
        "jobs", "create", "--team", "plant", "--name", "r", "--schedule", "0 * * * *",
        "--mqtt", "mqtt://mqtt.example.com", "--topic", "a/b",
    )  # fmt: skip
    assert (job["target"]["qos"], job["target"]["retain"], job["target"]["password"]) == (1, False, None)
    wrong = server.run(
        "jobs", "create", "--team", "plant", "--name", "s", "--schedule", "0 * * * *",
        "--mqtt", "mqtt://mqtt.example.com", "--topic", "a/b", "--jetstream",
    )  # fmt: skip
    assert wrong.exit_code == 2
    assert "--jetstream" in wrong.stderr
    assert "--nats" in wrong.stderr
    two = server.run(
        "jobs", "create", "--team", "plant", "--name", "t", "--schedule", "0 * * * *",
        "--mqtt", "mqtt://m.example.com", "--nats", "nats://n.example.com", "--topic", "a",
    )  # fmt: skip
    assert two.exit_code == 2
    assert "give one target" in two.stderr


def test_refusals_name_the_field(server: Server) -> None:
    base = ["jobs", "create", "--team", "data", "--name", "bad", "--schedule", "0 * * * *"]
    cases = {
        ("--nats", "nats://u:secret-pw@nats.example.com", "--subject", "a.b"): "target.url",
        ("--nats", "nats://nats.example.com", "--subject", "orders.*"): "target.subject",
        ("--nats", "http://nats.example.com", "--subject", "a"): "target.url",
        ("--mqtt", "mqtt://mqtt.example.com", "--topic", "plant/+/reports"): "target.topic",
        ("--mqtt", "mqtt://10.1.2.3", "--topic", "a"): "target.url",
        (
            "--nats",
            "nats://nats.example.com",
            "--subject",
            "a",
            "--broker-token-secret",
            "nope",
        ): "target.token",
    }
    for flags, field in cases.items():
        result = server.run(*base, *flags)
        assert result.exit_code != 0, flags
        assert field in result.stderr, (flags, result.stderr)
        assert "secret-pw" not in result.stderr + result.stdout
    assert server.json("jobs", "list", "--team", "data")["items"] == []


def test_apply_broker_targets(server: Server, tmp_path: Path) -> None:
    set_secret(server, "ops/nats-password", "pw-1")
    jobs: list[dict[str, Any]] = [
        {
            "name": "to-nats",
            "schedule": "0 3 * * *",
            "target": {
                "type": "nats",
                "url": "tls://nats.example.com:4222",
                "subject": "ops.nightly",
                "headers": {"X-Env": "prod"},
                "user": "svc",
                "password": {"secret": "nats-password"},
            },
        },
        {
            "name": "to-mqtt",
            "schedule": "0 4 * * *",
            "target": {"type": "mqtt", "url": "mqtt://mqtt.example.com:1883", "topic": "ops/nightly"},
        },
    ]
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump({"team": "ops", "jobs": jobs}, sort_keys=False))
    first = server.run("apply", "-f", str(path))
    assert first.exit_code == 0, first.stderr
    again = server.run("apply", "-f", str(path))
    assert again.stdout.startswith("No changes"), again.stdout
    listed = {job["name"]: job for job in server.json("jobs", "list", "--team", "ops")["items"]}
    assert listed["to-nats"]["target"]["password"] == {"secret": "nats-password"}
    assert listed["to-nats"]["target"]["jetstream"] is False
    assert listed["to-mqtt"]["target"]["qos"] == 1
    jobs[1]["target"]["qos"] = 2
    path.write_text(yaml.safe_dump({"team": "ops", "jobs": jobs}, sort_keys=False))
    changed = server.run("apply", "-f", str(path))
    assert changed.exit_code == 0, changed.stderr
    assert server.json("jobs", "get", "ops/to-mqtt")["target"]["qos"] == 2


def test_adopt_moves_plain_broker_credentials_into_secrets(server: Server) -> None:
    spec = {
        "team": "data",
        "name": "pub",
        "schedule": "0 * * * *",
        "target": {
            "type": "nats",
            "url": "nats://nats.example.com",
            "subject": "a",
            "headers": {"X-Key": "k-plain-2"},
            "user": "svc",
            "password": "pw-plain-1",
        },
    }
    created = server.run("jobs", "create", "-f", "-", input=json.dumps(spec))
    assert created.exit_code == 0, created.stderr
    assert server.json("jobs", "get", "data/pub")["plain_values"] == [
        "target.headers.X-Key",
        "target.password",
    ]
    adopted = server.run("secrets", "adopt", "data/pub")
    assert adopted.exit_code == 0, adopted.stderr
    after = server.json("jobs", "get", "data/pub")
    assert after["plain_values"] == []
    assert after["target"]["password"] == {"secret": "pub.password"}
    assert after["target"]["headers"] == {"X-Key": {"secret": "pub.x-key"}}
    assert after["target"]["user"] == "svc"
