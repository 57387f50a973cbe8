"""The ``mqtt`` target kind: a message published to an MQTT topic, MQTT 5, QoS 1 or 2
(credentials may refer to team secrets)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from yarl import URL

from cronwheel.model import MqttQos, MqttTarget
from cronwheel.targets.checks import MQTT_SCHEMES, check_mqtt, parse_broker_url
from cronwheel.targets.kinds.base import (
    BROKER_CREDENTIALS,
    TOPIC,
    Flag,
    Kind,
    optional_from_json,
    optional_to_json,
)


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
        TOPIC,
        Flag("--qos", "qos", "MQTT QoS (with --mqtt; default 1).", choices=("1", "2")),
        Flag("--retain", "retain", "The broker keeps the message (with --mqtt).", is_flag=True),
        *BROKER_CREDENTIALS,
    ),
)
