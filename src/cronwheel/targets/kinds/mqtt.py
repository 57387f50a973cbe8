"""The ``mqtt`` target kind: a message published to an MQTT topic, MQTT 5, QoS 1 or 2
(credentials may refer to team secrets)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from yarl import URL

from cronwheel.errors import InvalidInputError
from cronwheel.targets.checks import (
    MAX_MQTT_TOPIC_BYTES,
    MQTT_SCHEMES,
    check_credential,
    parse_broker_url,
    utf8,
)
from cronwheel.targets.kinds.base import (
    BROKER_CREDENTIALS,
    TOPIC_FLAG,
    Flag,
    Kind,
    optional_from_json,
    optional_to_json,
)
from cronwheel.targets.values import Value

MqttQos = Literal[1, 2]  # 1: at least once to the broker (PUBACK); 2: exactly once (PUBCOMP)


@dataclass(frozen=True, slots=True)
class MqttTarget:
    """Publish the payload to an MQTT topic (MQTT 5; QoS 1 or 2)."""

    url: str  # mqtt://host:1883, mqtts://host:8883
    topic: str
    qos: MqttQos = 1
    retain: bool = False
    username: Value | None = None
    password: Value | None = None
    type: Literal["mqtt"] = "mqtt"


def check_mqtt(target: MqttTarget) -> URL:
    """Refuse what aiomqtt cannot publish; returns the URL."""
    url = parse_broker_url(target.url, MQTT_SCHEMES)
    topic = target.topic
    size = len(utf8("target.topic", topic))
    if not 0 < size <= MAX_MQTT_TOPIC_BYTES:
        raise InvalidInputError(f"target.topic must be 1 to {MAX_MQTT_TOPIC_BYTES} bytes of UTF-8")
    if "\0" in topic:
        raise InvalidInputError("target.topic contains a NUL byte")
    if "+" in topic or "#" in topic:
        raise InvalidInputError(
            "target.topic must not contain the wildcards + and # (a message is published to one topic)"
        )
    if target.qos not in (1, 2) or isinstance(target.qos, bool):
        raise InvalidInputError("target.qos must be 1 or 2")
    check_credential("target.username", target.username)
    check_credential("target.password", target.password)
    if target.password is not None and target.username is None:
        raise InvalidInputError("target.password needs target.username")
    return url


def to_json(target: MqttTarget) -> dict[str, Any]:
    return {
        "type": "mqtt",
        "url": target.url,
        "topic": target.topic,
        "qos": target.qos,
        "retain": target.retain,
        "username": optional_to_json(target.username),
        "password": optional_to_json(target.password),
    }


def from_json(data: Mapping[str, Any]) -> MqttTarget:
    return MqttTarget(
        url=data["url"],
        topic=data["topic"],
        qos=_qos(data["qos"]),
        retain=bool(data["retain"]),
        username=optional_from_json(data.get("username")),
        password=optional_from_json(data.get("password")),
    )


def _qos(data: Any) -> MqttQos:
    if data == 1:
        return 1
    if data == 2:
        return 2
    raise ValueError(f"unknown MQTT QoS {data!r} in the store")


def summary(target: Mapping[str, Any]) -> str:
    retain = ", retain" if target.get("retain") else ""
    return f"mqtt {target['url']} topic {target['topic']} (qos {target['qos']}{retain})"


def addresses(target: MqttTarget) -> list[tuple[str, URL]]:
    return [("target.url", parse_broker_url(target.url, MQTT_SCHEMES))]


KIND = Kind(
    tag="mqtt",
    record=MqttTarget,
    check=check_mqtt,
    to_json=to_json,
    from_json=from_json,
    summary=summary,
    credentials=("username", "password"),
    addresses=addresses,
    flags=(
        Flag("--mqtt", "mqtt_url", "Target: publish to MQTT (mqtt:// or mqtts://).", metavar="URL"),
        TOPIC_FLAG,
        Flag("--qos", "qos", "MQTT QoS (with --mqtt; default 1).", choices=("1", "2")),
        Flag("--retain", "retain", "The broker keeps the message (with --mqtt).", is_flag=True),
        *BROKER_CREDENTIALS,
    ),
)
