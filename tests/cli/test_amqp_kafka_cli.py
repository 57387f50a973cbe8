"""``cronwheel jobs create --rabbitmq/--kafka`` and ``cronwheel apply -f`` with RabbitMQ and Kafka
targets, against a live API server (NATS and MQTT: test_broker_targets_cli.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .conftest import Server

BASE = ("jobs", "create", "--team", "data", "--schedule", "0 3 * * *")


def set_secret(server: Server, ref: str, value: str) -> None:
    result = server.run("secrets", "set", ref, input=value + "\n")
    assert result.exit_code == 0, result.stderr


def test_create_a_rabbitmq_job_with_secret_credentials(server: Server) -> None:
    set_secret(server, "data/mq-user", "svc-cron")
    set_secret(server, "data/mq-password", "Pa55-word-xyz")
    result = server.run(
        *BASE, "--name", "mq", "--rabbitmq", "amqps://mq.example.com/billing", "--exchange", "amq.topic",
        "--routing-key", "reports.nightly", "--header", "X-Env=prod",
        "--broker-user-secret", "mq-user", "--broker-password-secret", "mq-password",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert "rabbitmq amqps://mq.example.com/billing amq.topic key reports.nightly" in result.stdout
    assert "username={secret: mq-user} password={secret: mq-password}" in result.stdout
    job = server.json("jobs", "get", "data/mq")
    assert job["target"] == {
        "type": "rabbitmq",
        "url": "amqps://mq.example.com/billing",
        "exchange": "amq.topic",
        "routing_key": "reports.nightly",
        "headers": {"X-Env": "prod"},
        "username": {"secret": "mq-user"},
        "password": {"secret": "mq-password"},
    }
    assert "Pa55-word-xyz" not in result.stdout


def test_create_a_kafka_job(server: Server) -> None:
    job = server.json(
        *BASE, "--name", "k", "--kafka", "k1.example.com:9092, k2.example.com:9092", "--topic", "reports",
        "--key", "tenant-7", "--kafka-tls",
    )  # fmt: skip
    assert job["target"] == {
        "type": "kafka",
        "bootstrap_servers": ["k1.example.com:9092", "k2.example.com:9092"],
        "topic": "reports",
        "key": "tenant-7",
        "headers": {},
        "tls": True,
        "sasl_mechanism": None,
        "username": None,
        "password": None,
    }
    shown = server.run("jobs", "get", "data/k").stdout
    assert "kafka k1.example.com:9092,k2.example.com:9092 topic reports key tenant-7" in shown


def test_flag_mistakes_are_usage_errors(server: Server) -> None:
    cases: list[tuple[tuple[str, ...], str]] = [
        (("--rabbitmq", "amqp://mq.example.com/"), "--rabbitmq needs --routing-key"),
        (("--kafka", "k:9092"), "--kafka needs --topic"),
        (("--http", "https://hooks.example.com/", "--key", "k"), "--key go(es) with --kafka"),
        (("--kafka", "k:9092", "--topic", "t", "--exchange", "x"), "--exchange go(es) with --rabbitmq"),
        (("--rabbitmq", "amqp://h/", "--routing-key", "k", "--topic", "t"), "--topic do(es) not go with"),
        (("--kafka", "k:9092", "--topic", "t", "--qos", "2"), "--qos do(es) not go with --kafka"),
        (("--kafka", "k:9092", "--topic", "t", "--rabbitmq", "amqp://h/"), "give one target"),
        (("--kafka", "k:9092", "--topic", "t", "--method", "GET"), "--method do(es) not go with --kafka"),
        (
            ("--kafka", "k:9092", "--topic", "t", "--broker-user", "u", "--broker-user-secret", "s"),
            "give --broker-user or --broker-user-secret, not both",
        ),
    ]
    for flags, message in cases:
        result = server.run(*BASE, "--name", "x", *flags)
        assert result.exit_code == 2, (flags, result.stdout)
        assert message in result.stderr, (flags, result.stderr)


def test_the_server_refuses_a_url_with_credentials(server: Server) -> None:
    result = server.run(
        *BASE, "--name", "x", "--rabbitmq", "amqp://guest:s3cr3t@mq.example.com/", "--routing-key", "k"
    )
    assert result.exit_code == 2
    assert "target.url must not hold credentials (user info)" in result.stderr
    assert "s3cr3t" not in result.stderr


def test_apply_broker_jobs_then_change_nothing(server: Server, tmp_path: Path) -> None:
    set_secret(server, "data/kafka-password", "K-pass-123")
    jobs: list[dict[str, Any]] = [
        {
            "name": "mq",
            "schedule": "0 3 * * *",
            "target": {"type": "rabbitmq", "url": "amqp://mq.example.com:5672/", "routing_key": "reports"},
        },
        {
            "name": "k",
            "schedule": "0 4 * * *",
            "target": {
                "type": "kafka",
                "bootstrap_servers": ["k1.example.com:9092"],
                "topic": "reports",
                "sasl_mechanism": "SCRAM-SHA-256",
                "username": "svc",
                "password": {"secret": "kafka-password"},
            },
        },
    ]
    path = tmp_path / "jobs.yaml"
    path.write_text(yaml.safe_dump({"team": "data", "jobs": jobs}, sort_keys=False))
    first = server.run("apply", "-f", str(path))
    assert first.exit_code == 0, first.stderr
    assert "+ create data/mq" in first.stdout
    assert "+ create data/k" in first.stdout
    again = server.run("apply", "-f", str(path))
    assert again.exit_code == 0, again.stderr
    assert "create" not in again.stdout
    assert "update" not in again.stdout
    jobs[1]["target"]["username"] = "svc-2"
    jobs[0]["target"]["routing_key"] = "reports.v2"
    path.write_text(yaml.safe_dump({"team": "data", "jobs": jobs}, sort_keys=False))
    plan = server.run("apply", "-f", str(path), "--dry-run")
    assert plan.exit_code == 0, plan.stderr
    assert "target.routing_key: 'reports' -> 'reports.v2'" in plan.stdout
    assert "target.username: (hidden) -> (hidden)" in plan.stdout  # a plain credential is not shown
    assert "svc-2" not in plan.stdout


def test_apply_refuses_a_bad_broker_job_naming_the_field(server: Server, tmp_path: Path) -> None:
    path = tmp_path / "jobs.yaml"
    bad = {"type": "kafka", "bootstrap_servers": ["k:9092"], "topic": "has space"}
    path.write_text(
        yaml.safe_dump({"team": "data", "jobs": [{"name": "k", "schedule": "0 3 * * *", "target": bad}]})
    )
    result = server.run("apply", "-f", str(path))
    assert result.exit_code == 2
    assert "target.topic:" in result.stderr
    assert "nothing applied" in result.stderr


def test_adopt_moves_a_plain_broker_password_into_a_secret(server: Server, tmp_path: Path) -> None:
    target = {
        "type": "kafka",
        "bootstrap_servers": ["k1.example.com:9092"],
        "topic": "reports",
        "sasl_mechanism": "PLAIN",
        "username": "svc",
        "password": "Plain-Pa55",
    }
    path = tmp_path / "k.yaml"
    path.write_text(yaml.safe_dump({"team": "data", "name": "k", "schedule": "0 3 * * *", "target": target}))
    created = server.json("jobs", "create", "-f", str(path))
    assert created["plain_values"] == ["target.password"]  # a user name is an identity, not a credential
    moved = server.run("secrets", "adopt", "data/k")
    assert moved.exit_code == 0, moved.stderr
    assert "moved target.password -> secret data/k.password" in moved.stdout
    job = server.json("jobs", "get", "data/k")
    assert (job["target"]["username"], job["target"]["password"]) == ("svc", {"secret": "k.password"})
    assert job["plain_values"] == []
