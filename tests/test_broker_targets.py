"""Broker targets (nats, mqtt) before any attempt: what cronwheel.targets.checks refuses, naming the field
and never quoting a credential; the target policy's SSRF guard on the broker host; the API's specs
to records and back; the fields listed as secret references and as plain values."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import TypeAdapter, ValidationError

from cronwheel.api.schemas.targets import TargetSpec, target_from_record
from cronwheel.errors import InvalidInputError
from cronwheel.jobs.service import TargetPolicy
from cronwheel.model import MqttTarget, NatsTarget, SecretRef, Target
from cronwheel.secrets.resolve import Resolved
from cronwheel.targets import kinds
from cronwheel.targets.kinds import check_target, plain_values, secret_references

SPEC: TypeAdapter[Any] = TypeAdapter(TargetSpec)
NATS = "nats://nats.example.com:4222"
MQTT = "mqtt://mqtt.example.com:1883"


@pytest.mark.parametrize(
    ("target", "field", "words"),
    [
        (NatsTarget("nats://user:pw-123@nats.example.com", "a"), "target.url", "must not hold credentials"),
        (NatsTarget("nats://tok-123@nats.example.com", "a"), "target.url", "secret references"),
        (NatsTarget("http://nats.example.com", "a"), "target.url", "nats://host:port or tls://host:port"),
        (NatsTarget("nats://nats.example.com:4222/x", "a"), "target.url", "nothing after the port"),
        (NatsTarget("nats://nats.example.com:99999", "a"), "target.url", "not a valid URL"),
        (NatsTarget("nats://", "a"), "target.url", "must be"),
        (NatsTarget("nats://127.1:4222", "a"), "target.url", "write it as 127.0.0.1"),
        (NatsTarget(NATS, ""), "target.subject", "1 to 1024"),
        (NatsTarget(NATS, "orders.*"), "target.subject", "wildcards"),
        (NatsTarget(NATS, "orders.>"), "target.subject", "wildcards"),
        (NatsTarget(NATS, "two words"), "target.subject", "whitespace"),
        (NatsTarget(NATS, "a..b"), "target.subject", "empty token"),
        (NatsTarget(NATS, ".a"), "target.subject", "empty token"),
        (NatsTarget(NATS, "a", headers=(("Bad Name", "x"),)), "target.headers", "not a header token"),
        (NatsTarget(NATS, "a", headers=(("X", "a\r\nb"),)), "target.headers['X']", "control character"),
        (NatsTarget(NATS, "a", password="pw-123"), "target.password", "needs target.user"),
        (NatsTarget(NATS, "a", user="u", token="tok-123"), "target.token", "not both"),
        (NatsTarget(NATS, "a", token=SecretRef("no spaces")), "target.token", "must name a secret"),
        (MqttTarget("mqtt://u:pw-123@mqtt.example.com", "a"), "target.url", "must not hold credentials"),
        (MqttTarget("mqtts://mqtt.example.com?x=1", "a"), "target.url", "nothing after the port"),
        (MqttTarget("nats://mqtt.example.com", "a"), "target.url", "mqtt://host:port or mqtts://host:port"),
        (MqttTarget(MQTT, ""), "target.topic", "1 to 65535 bytes"),
        (MqttTarget(MQTT, "é" * 32768), "target.topic", "1 to 65535 bytes"),
        (MqttTarget(MQTT, "a/\0"), "target.topic", "NUL"),
        (MqttTarget(MQTT, "plant/+/x"), "target.topic", "wildcards"),
        (MqttTarget(MQTT, "plant/#"), "target.topic", "wildcards"),
        (MqttTarget(MQTT, "a", qos=0), "target.qos", "1 or 2"),  # type: ignore[arg-type]
        (MqttTarget(MQTT, "a", password="pw-123"), "target.password", "needs target.username"),
        (MqttTarget(MQTT, "a", username="a\0b"), "target.username", "control character"),
    ],
)
def test_what_no_attempt_could_publish_is_refused(target: Target, field: str, words: str) -> None:
    with pytest.raises(InvalidInputError) as refused:
        check_target(target)
    message = str(refused.value)
    assert message.startswith(field) or field in message, message
    assert words in message
    assert "pw-123" not in message
    assert "tok-123" not in message


@pytest.mark.parametrize(
    "target",
    [
        NatsTarget(NATS, "orders.nightly"),
        NatsTarget("tls://nats.example.com", "a", jetstream=True, user="u", password=SecretRef("p")),
        NatsTarget("nats://[2001:4860::1]:4222", "a-b_c.D", token="t"),
        MqttTarget(MQTT, "plant/3/reports", qos=2, retain=True, username="u", password="p"),
        MqttTarget("mqtts://mqtt.example.com", "/leading/and/trailing/"),
        MqttTarget(MQTT, "é" * 32767),
    ],
)
def test_what_a_broker_takes_is_accepted(target: Target) -> None:
    check_target(target)


@pytest.mark.parametrize(
    ("target", "reason"),
    [
        (NatsTarget("nats://127.0.0.1:4222", "a"), "loopback"),
        (NatsTarget("tls://10.1.2.3", "a"), "a private address"),
        (MqttTarget("mqtt://169.254.169.254", "a"), "link-local"),
        (MqttTarget("mqtts://localhost:8883", "a"), "loopback"),
        (MqttTarget("mqtt://[::1]", "a"), "loopback"),
    ],
)
def test_the_policy_guards_the_broker_host_as_an_http_host(target: Target, reason: str) -> None:
    with pytest.raises(InvalidInputError, match=reason) as refused:
        TargetPolicy().check(target)
    assert str(refused.value).startswith("target.url points to a non-public address")
    TargetPolicy(allowed_networks=("127.0.0.0/8", "10.0.0.0/8", "169.254.0.0/16", "::1/128")).check(target)
    TargetPolicy().check(NatsTarget(NATS, "a"))  # names are judged at attempt time


def test_specs_round_trip_through_records_and_the_store() -> None:
    for body in (
        {
            "type": "nats",
            "url": NATS,
            "subject": "a.b",
            "jetstream": True,
            "headers": {"X-Env": "prod", "X-Key": {"secret": "k"}},
            "user": "svc",
            "password": {"secret": "nats-password"},
            "token": None,
        },
        {
            "type": "mqtt",
            "url": MQTT,
            "topic": "a/b",
            "qos": 2,
            "retain": True,
            "username": {"secret": "mqtt-user"},
            "password": {"secret": "mqtt-password"},
        },
    ):
        record = SPEC.validate_python(body).to_record()
        assert target_from_record(record) == body
        assert kinds.target_from_json(kinds.target_to_json(record)) == record


def test_spec_defaults_and_refusals() -> None:
    nats = SPEC.validate_python({"type": "nats", "url": NATS, "subject": "a"}).to_record()
    assert nats == NatsTarget(NATS, "a")
    mqtt = SPEC.validate_python({"type": "mqtt", "url": MQTT, "topic": "a"}).to_record()
    assert (mqtt.qos, mqtt.retain, mqtt.username) == (1, False, None)
    for bad, where in (
        ({"type": "mqtt", "url": MQTT, "topic": "a", "qos": 0}, ("qos",)),
        ({"type": "mqtt", "url": MQTT, "topic": "a", "qos": "1"}, ("qos",)),
        ({"type": "nats", "url": NATS, "subject": "a", "token": {"secret": "bad name"}}, ("token",)),
        ({"type": "nats", "url": NATS, "subject": "a", "extra": 1}, ("extra",)),
    ):
        with pytest.raises(ValidationError) as refused:
            SPEC.validate_python(bad)
        locations = [error["loc"] for error in refused.value.errors()]
        assert any(loc[-len(where) :] == where or where[0] in loc for loc in locations), locations


def test_references_and_plain_values_name_their_fields() -> None:
    nats = NatsTarget(
        NATS,
        "a",
        headers=(("X", "1"), ("K", SecretRef("k"))),
        user="svc",
        password=SecretRef("p"),
        token=None,
    )
    assert secret_references(nats) == [
        ("target.headers.K", SecretRef("k")),
        ("target.password", SecretRef("p")),
    ]
    assert plain_values(nats) == ["target.headers.X"]  # a user name is an identity, not a credential
    mqtt = MqttTarget(MQTT, "a", username=SecretRef("u"), password="in-clear")
    assert secret_references(mqtt) == [("target.username", SecretRef("u"))]
    assert plain_values(mqtt) == ["target.password"]


def test_resolution_replaces_every_reference() -> None:
    resolved = Resolved({"k": "kv", "p": "pv", "t": "tv", "u": "uv"})
    nats = NatsTarget(
        NATS, "a", headers=(("K", SecretRef("k")),), user=SecretRef("u"), password=SecretRef("p")
    )
    assert resolved.target(nats) == NatsTarget(NATS, "a", headers=(("K", "kv"),), user="uv", password="pv")
    assert resolved.target(NatsTarget(NATS, "a", token=SecretRef("t"))).token == "tv"
    mqtt = MqttTarget(MQTT, "a", username=SecretRef("u"), password=SecretRef("p"))
    assert resolved.target(mqtt) == MqttTarget(MQTT, "a", username="uv", password="pv")
