"""gRPC targets from the command line: ``jobs create --grpc ...`` and ``apply -f``."""

from __future__ import annotations

from pathlib import Path

import yaml

from .conftest import Server

ADDRESS = "orders.example.com:50051"


def test_create_with_grpc_flags(server: Server) -> None:
    result = server.run(
        "jobs", "create", "--team", "data", "--name", "orders", "--schedule", "0 3 * * *",
        "--grpc", ADDRESS, "--grpc-method", "shop.v1.Orders/Nightly", "--grpc-tls",
        "--metadata", "x-tenant=acme", "--payload", '{"full": true}',
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert f"grpcs {ADDRESS} shop.v1.Orders/Nightly" in result.stdout
    job = server.json("jobs", "get", "data/orders")
    assert job["target"] == {
        "type": "grpc",
        "address": ADDRESS,
        "method": "shop.v1.Orders/Nightly",
        "tls": True,
        "metadata": {"x-tenant": "acme"},
        "descriptor_set": None,
    }
    assert job["plain_values"] == ["target.metadata.x-tenant"]


def test_grpc_flags_that_do_not_go_together_are_usage_errors(server: Server) -> None:
    base = ("jobs", "create", "--team", "data", "--name", "x", "--schedule", "0 3 * * *")
    no_method = server.run(*base, "--grpc", ADDRESS)
    assert no_method.exit_code == 2
    assert "--grpc needs --grpc-method" in no_method.stderr
    stray = server.run(*base, "--http", "https://hooks.example.com/x", "--metadata", "k=v")
    assert stray.exit_code == 2
    assert "go with --grpc" in stray.stderr
    two = server.run(
        *base, "--http", "https://hooks.example.com/x", "--grpc", ADDRESS, "--grpc-method", "a.B/C"
    )
    assert two.exit_code == 2
    assert "give one target" in two.stderr
    header = server.run(*base, "--grpc", ADDRESS, "--grpc-method", "a.B/C", "--header", "K=v")
    assert header.exit_code == 2
    assert "go with --http" in header.stderr


def test_a_refused_address_names_the_field(server: Server) -> None:
    result = server.run(
        "jobs", "create", "--team", "data", "--name", "x", "--schedule", "0 3 * * *",
        "--grpc", "10.0.0.1:50051", "--grpc-method", "a.B/C",
    )  # fmt: skip
    assert result.exit_code != 0
    assert "target.address points to a non-public address: 10.0.0.1, a private address" in result.stderr


def test_apply_takes_the_json_and_yaml_shape(server: Server, tmp_path: Path) -> None:
    target = {
        "type": "grpc",
        "address": ADDRESS,
        "method": "shop.Orders/Nightly",
        "metadata": {"x-tenant": "acme"},
    }
    path = tmp_path / "jobs.yaml"
    job = {"name": "orders", "schedule": "0 3 * * *", "target": target, "payload": {"full": True}}
    path.write_text(yaml.safe_dump({"team": "data", "jobs": [job]}, sort_keys=False))
    first = server.run("apply", "-f", str(path))
    assert first.exit_code == 0, first.stderr
    assert first.stdout.splitlines()[0] == "+ create data/orders"
    stored = server.json("jobs", "get", "data/orders")
    assert stored["target"] == {**target, "tls": False, "descriptor_set": None}
    again = server.run("apply", "-f", str(path))
    assert again.stdout.strip().startswith("No changes")
    target["metadata"] = {"x-tenant": "globex", "authorization": {"secret": "orders-token"}}
    assert server.run("secrets", "set", "data/orders-token", input="tok\n").exit_code == 0
    path.write_text(yaml.safe_dump({"team": "data", "jobs": [job]}, sort_keys=False))
    changed = server.run("apply", "-f", str(path))
    assert changed.exit_code == 0, changed.stderr
    assert "    target.metadata.x-tenant: (hidden) -> (hidden)" in changed.stdout  # values may be secrets
    assert "    target.metadata.authorization: (none) -> {secret: orders-token}" in changed.stdout
    assert "globex" not in changed.stdout
    bad = {**job, "target": {**target, "address": "orders.example.com"}}
    path.write_text(yaml.safe_dump({"team": "data", "jobs": [bad]}, sort_keys=False))
    refused = server.run("apply", "-f", str(path))
    assert refused.exit_code != 0
    assert "target.address must be host:port" in refused.stderr


def test_secrets_adopt_moves_plain_metadata_into_secrets(server: Server) -> None:
    server.run(
        "jobs", "create", "--team", "data", "--name", "orders", "--schedule", "0 3 * * *",
        "--grpc", ADDRESS, "--grpc-method", "a.B/C", "--metadata", "authorization=Bearer t0ken-value",
    )  # fmt: skip
    result = server.run("secrets", "adopt", "data/orders")
    assert result.exit_code == 0, result.stderr
    assert "moved target.metadata.authorization -> secret data/orders.authorization" in result.stdout
    job = server.json("jobs", "get", "data/orders")
    assert job["target"]["metadata"] == {"authorization": {"secret": "orders.authorization"}}
    assert job["plain_values"] == []
    assert "t0ken-value" not in result.stdout
