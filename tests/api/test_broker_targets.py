"""``rabbitmq`` and ``kafka`` targets through every layer but the executors: the API's schema and
its 422s, the service's checks (:mod:`cronwheel.targets.checks`) and policy (the SSRF guard on every
broker host), the store's codec, secret references and the plain values ``secrets adopt`` moves."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import httpx
import pytest

from cronwheel.api.schemas.fields import reserved_kind
from cronwheel.errors import InvalidInputError
from cronwheel.jobs.service import TargetPolicy
from cronwheel.model import Job, KafkaTarget, RabbitMqTarget, SecretRef, Target
from cronwheel.store import JobQuery
from cronwheel.store.port import StoredSecret
from cronwheel.targets.kinds import (
    check_target,
    plain_values,
    secret_references,
    target_from_json,
    target_to_json,
)

from .conftest import Env, job_body

PROBLEM = "application/problem+json"


def rabbitmq(**fields: Any) -> dict[str, Any]:
    return {
        "type": "rabbitmq",
        "url": "amqp://mq.example.com:5672/billing",
        "routing_key": "reports",
        **fields,
    }


def kafka(**fields: Any) -> dict[str, Any]:
    return {"type": "kafka", "bootstrap_servers": ["k1.example.com:9092"], "topic": "reports", **fields}


RABBIT = RabbitMqTarget(
    url="amqps://mq.example.com/billing",
    exchange="amq.topic",
    routing_key="reports.nightly",
    headers=(("X-Team", "blue"), ("Authorization", SecretRef("mq-token"))),
    username="svc-cron",
    password=SecretRef("mq-password"),
)
KAFKA = KafkaTarget(
    bootstrap_servers=("k1.example.com:9092", "[2606:4700:4700::1111]:9093"),
    topic="billing.reports_v2",
    key="tenant-7",
    headers=(("X-Team", SecretRef("team-header")),),
    tls=True,
    sasl_mechanism="SCRAM-SHA-512",
    username=SecretRef("kafka-user"),
    password=SecretRef("kafka-password"),
)


@pytest.mark.parametrize(
    "target", [RABBIT, KAFKA, RabbitMqTarget("amqp://h/", "k"), KafkaTarget(("h:1",), "t")]
)
def test_the_codec_round_trips(target: Target) -> None:
    assert target_from_json(target_to_json(target)) == target


async def test_created_read_back_and_stored(client: httpx.AsyncClient, env: Env) -> None:
    body_rabbit = rabbitmq(
        exchange="amq.direct",
        headers={"X-Team": "blue", "Authorization": {"secret": "mq-token"}},
        username={"secret": "mq-user"},
        password={"secret": "mq-password"},
    )
    for name in ("mq-token", "mq-user", "mq-password"):  # sealed elsewhere: the API checks names only
        await env.store.put_secret(StoredSecret("data", name, "k1", b"sealed"))
    created = await client.post("/v1/jobs", json=job_body(name="mq", target=body_rabbit))
    assert created.status_code == 201, created.text
    assert created.json()["target"] == {**body_rabbit, "exchange": "amq.direct"}
    assert created.json()["plain_values"] == ["target.headers.X-Team"]  # as for HTTP headers
    kafka_body = kafka(key=None, username="svc", password="plain-pw", sasl_mechanism="PLAIN")
    env.service.policy = replace(env.service.policy, allow_plain_credentials=True)  # the operator's choice
    made = await client.post("/v1/jobs", json=job_body(name="kafka", target=kafka_body))
    assert made.status_code == 201, made.text
    out = made.json()
    assert out["target"] == {**kafka_body, "headers": {}, "tls": False}
    assert out["plain_values"] == ["target.password"]  # what `secrets adopt` moves (a user name is not)
    stored = await env.store.get_job(out["id"])
    assert stored.target == KafkaTarget(
        ("k1.example.com:9092",), "reports", sasl_mechanism="PLAIN", username="svc", password="plain-pw"
    )


REFUSED: list[tuple[dict[str, Any], str]] = [
    (rabbitmq(url="https://mq.example.com/"), "target.url must be an absolute amqp:// or amqps:// URL"),
    (rabbitmq(url="amqp:///vhost"), "target.url must be an absolute amqp:// or amqps:// URL with a host"),
    (rabbitmq(url="amqp://guest:s3cr3t@mq.example.com/"), "target.url must not hold credentials"),
    (rabbitmq(url="amqp://mq.example.com/a/b"), "target.url has more than one path segment"),
    (rabbitmq(url="amqp://mq.example.com/?heartbeat=0"), "target.url must have no query or fragment"),
    (rabbitmq(url="amqp://0x7f.1/"), "target.url has the IPv4 address 127.0.0.1"),
    (rabbitmq(exchange="bad exchange"), "target.exchange must be at most 255 of A-Z a-z 0-9"),
    (rabbitmq(routing_key="é" * 200), "target.routing_key is longer than 255 bytes"),
    (rabbitmq(url="amqp://127.0.0.1/"), "target.url points to a non-public address: 127.0.0.1, a loopback"),
    (rabbitmq(url="amqp://localhost/"), "target.url points to a non-public address: localhost is 127.0.0.1"),
    (kafka(bootstrap_servers=["k1.example.com"]), "target.bootstrap_servers[0] must be host:port"),
    (kafka(bootstrap_servers=["ok.example:9092", "k:0"]), "target.bootstrap_servers[1] must be host:port"),
    (kafka(bootstrap_servers=["u:p@k:9092"]), "target.bootstrap_servers[0] must be host:port"),
    (
        kafka(bootstrap_servers=["10.1.2.3:9092"]),
        "target.bootstrap_servers[0] points to a non-public address",
    ),
    (kafka(bootstrap_servers=["[fd00:ec2::254]:9092"]), "a private (unique local) address"),
    (kafka(topic=".."), 'target.topic must be 1-249 of A-Z a-z 0-9 . _ - (and not "." or "..")'),
    (kafka(sasl_mechanism="PLAIN", username="svc"), "target.sasl_mechanism PLAIN needs target.username"),
    (
        kafka(username="svc", password="s3cr3t"),
        "target.username and target.password need target.sasl_mechanism",
    ),
]


@pytest.mark.parametrize(("target", "detail"), REFUSED, ids=[detail for _, detail in REFUSED])
async def test_refused_whole_naming_the_field(
    client: httpx.AsyncClient, env: Env, target: dict[str, Any], detail: str
) -> None:
    response = await client.post("/v1/jobs", json=job_body(target=target))
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == PROBLEM
    assert detail in response.json()["detail"]
    assert "s3cr3t" not in response.text
    assert (await env.store.list_jobs(JobQuery())).items == []


SCHEMA_REFUSED: list[tuple[dict[str, Any], str]] = [
    (kafka(topic="has space"), "topic"),
    (kafka(bootstrap_servers=[]), "bootstrap_servers"),
    (kafka(sasl_mechanism="GSSAPI", username="u", password="p"), "sasl_mechanism"),
    (rabbitmq(routing_key="k" * 256), "routing_key"),
    (rabbitmq(headers={"bad name": "v"}), "headers"),
    (rabbitmq(password={"secret": "bad name!"}), "password"),
    ({"type": "rabbitmq", "url": "amqp://mq.example.com/"}, "routing_key"),
]


@pytest.mark.parametrize(("target", "field"), SCHEMA_REFUSED, ids=[field for _, field in SCHEMA_REFUSED])
async def test_the_schema_names_the_field(
    client: httpx.AsyncClient, target: dict[str, Any], field: str
) -> None:
    response = await client.post("/v1/jobs", json=job_body(target=target))
    assert response.status_code == 422, response.text
    assert field in response.text


def job(target: Target) -> Job:
    return Job(id="", team="data", name="n", schedule="0 3 * * *", target=target)


def test_loopback_brokers_pass_where_an_operator_allows_them() -> None:
    allowed = TargetPolicy(allowed_networks=("127.0.0.0/8",))
    for target in (
        RabbitMqTarget("amqp://127.0.0.1:5672/", "k"),
        KafkaTarget(("127.0.0.1:9092", "localhost:9093"), "t"),
    ):
        allowed.check(target)
        with pytest.raises(InvalidInputError, match="points to a non-public address"):
            TargetPolicy().check(target)


@pytest.mark.parametrize(
    ("target", "detail"),
    [
        (
            RabbitMqTarget("amqp://mq.example.com/", "k", headers=(("X", "\ud800"),)),
            "target.headers['X'] is not valid",
        ),
        (
            RabbitMqTarget("amqp://mq.example.com/", "k", password="a\0b"),
            "target.password contains a control character",
        ),
        (
            RabbitMqTarget("amqp://mq.example.com/", "k", username=SecretRef("bad name")),
            "target.username must name",
        ),
        (KafkaTarget((), "t"), "target.bootstrap_servers must list at least one host:port"),
        (
            KafkaTarget(("k:9092",), "t", headers=(("h" * 256, "v"),)),
            "target.headers has a name longer than 255",
        ),
    ],
)
def test_the_checks_for_other_writers(target: Target, detail: str) -> None:
    with pytest.raises(InvalidInputError, match="^" + detail.replace("[", r"\[").replace("(", r"\(")):
        check_target(target)


def test_secret_references_and_plain_values() -> None:
    assert secret_references(RABBIT) == [
        ("target.headers.Authorization", SecretRef("mq-token")),
        ("target.password", SecretRef("mq-password")),
    ]
    assert plain_values(RABBIT) == ["target.headers.X-Team"]  # a user name is an identity, not listed
    assert [field for field, _ in secret_references(KAFKA)] == [
        "target.headers.X-Team",
        "target.username",
        "target.password",
    ]
    assert plain_values(KAFKA) == []


async def test_a_missing_secret_is_refused(client: httpx.AsyncClient) -> None:
    response = await client.post(
        "/v1/jobs",
        json=job_body(target=kafka(sasl_mechanism="PLAIN", username="u", password={"secret": "nope"})),
    )
    assert response.status_code == 422, response.text
    assert "target.password refers to secret 'nope'" in response.text


def test_a_broker_in_an_allowed_network_is_reserved_as_network() -> None:
    policy = TargetPolicy(allowed_networks=("10.0.0.0/8",))
    assert reserved_kind(RabbitMqTarget("amqp://10.1.2.3/", "k"), policy) == "network"
    assert reserved_kind(KafkaTarget(("k.example.com:9092", "10.1.2.3:9092"), "t"), policy) == "network"
    assert reserved_kind(KafkaTarget(("k.example.com:9092",), "t"), policy) is None
    assert reserved_kind(RabbitMqTarget("amqp://192.168.1.1/", "k"), policy) is None  # refused: a 422
