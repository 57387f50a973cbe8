"""A host that holds a forbidden code point of the WHATWG URL Standard (once percent-decoded) is
refused when the target is written, for every kind that names a host: a 422 naming the field,
nothing stored, the value not echoed. :func:`cronwheel.targets.checks.forbidden_host_code_point` is
checked against a small reference written from the standard's lists."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st

from cronwheel.errors import InvalidInputError
from cronwheel.model import GrpcTarget, HttpTarget, KafkaTarget, MqttTarget, NatsTarget, RabbitMqTarget
from cronwheel.store import JobQuery
from cronwheel.targets.checks import NOT_UTF8, forbidden_host_code_point
from cronwheel.targets.kinds import check_target

from .conftest import Env, job_body

# the URL Standard's lists, as written there
HOST_CODE_POINTS = [0x00, 0x09, 0x0A, 0x0D, 0x20, 0x23, 0x2F, 0x3A, 0x3C, 0x3E, 0x3F, 0x40, 0x5B, 0x5C,
                    0x5D, 0x5E, 0x7C]  # fmt: skip
DOMAIN_CODE_POINTS = {*HOST_CODE_POINTS, *range(0x20), 0x25, 0x7F}


def reference(host: str) -> str | None:
    """Percent-decode byte by byte (a ``%`` without two hex digits stays), UTF-8 decode, and
    answer the first forbidden domain code point."""
    data, index = bytearray(), 0
    while index < len(host):
        escape = host[index + 1 : index + 3]
        if host[index] == "%" and len(escape) == 2 and all(c in "0123456789abcdefABCDEF" for c in escape):
            data.append(int(escape, 16))
            index += 3
        else:
            data += host[index].encode()
            index += 1
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return NOT_UTF8
    return next((char for char in text if ord(char) in DOMAIN_CODE_POINTS), None)


PIECES = st.sampled_from(
    ["a", "b", "-", ".", "0", "9", "%", "%2", "%0", "%09", "%20", "%25", "%2f", "%2F", "%41", "%7e", "%7f",
     "%c3%a9", "%c3", "%ff", "%e2%82%ac", "é", "\t", " ", "^", "|", "<", "@", "\x7f", "\x01", "~", "_"]
)  # fmt: skip


@given(st.lists(PIECES, max_size=12).map("".join))
def test_the_check_answers_as_the_reference(host: str) -> None:
    assert forbidden_host_code_point(host) == reference(host)


@given(st.text(max_size=20))
def test_the_check_answers_as_the_reference_for_any_text(host: str) -> None:
    assert forbidden_host_code_point(host) == reference(host)


@pytest.mark.parametrize(
    ("host", "found"),
    [("hooks.example.com", None), ("127.0.0.1%09", "\t"), ("hooks example.com", " "), ("a%2fb", "/"),
     ("a%2541", "%"), ("a^b", "^"), ("a|b", "|"), ("a%00b", "\x00"), ("a%7fb", "\x7f"), ("a%ffb", NOT_UTF8),
     ("ex%41mple.com", None), ("xn--nxasmq6b.com", None)],
)  # fmt: skip
def test_examples(host: str, found: str | None) -> None:
    assert forbidden_host_code_point(host) == found


PORT = 18080
# (the target, the field the refusal names)
REFUSED: list[tuple[dict[str, Any], str]] = [
    ({"type": "http", "url": f"http://127.0.0.1%09:{PORT}/s3cr3t"}, "target.url"),
    ({"type": "http", "url": "https://hooks example.com/s3cr3t"}, "target.url"),
    ({"type": "http", "url": "https://hooks%2fexample.com/s3cr3t"}, "target.url"),
    ({"type": "http", "url": "https://hooks^example.com/s3cr3t"}, "target.url"),
    ({"type": "nats", "url": "nats://nats%09.example.com:4222", "subject": "a.b"}, "target.url"),
    ({"type": "mqtt", "url": "mqtt://mq|example.com:1883", "topic": "a/b"}, "target.url"),
    ({"type": "rabbitmq", "url": "amqp://mq%20example.com/s3cr3t", "routing_key": "k"}, "target.url"),
    ({"type": "kafka", "bootstrap_servers": ["k1%09.example.com:9092"], "topic": "t"},
     "target.bootstrap_servers"),
    ({"type": "grpc", "address": "grpc^example.com:443", "method": "a.B/C"}, "target.address"),
]  # fmt: skip


@pytest.mark.parametrize(("target", "field"), REFUSED, ids=[str(t.get("url", t)) for t, _ in REFUSED])
async def test_refused_when_written(
    client: httpx.AsyncClient, env: Env, target: dict[str, Any], field: str
) -> None:
    response = await client.post("/v1/jobs", json=job_body(target=target))
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == "application/problem+json"
    problem = response.json()
    assert "which no host name may contain" in problem["detail"]
    assert [entry["field"].split(".")[:2] for entry in problem["errors"]] == [field.split(".")]
    assert "s3cr3t" not in response.text
    assert "example.com" not in response.text
    assert (await env.store.list_jobs(JobQuery())).items == []


@pytest.mark.parametrize("kind", ["webhook", "slack"])
async def test_notification_urls_are_refused(client: httpx.AsyncClient, kind: str) -> None:
    channel = {"type": kind, "url": "https://hooks%09.example.com/s3cr3t"}
    body = {"rules": [{"conditions": ["failure"], "channels": [channel]}]}
    response = await client.put("/v1/teams/data/notifications", json=body)
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["field"] == "rules.0.channels.0.url"
    assert "which no host name may contain" in response.text
    assert "s3cr3t" not in response.text


@pytest.mark.parametrize(
    "target",
    [HttpTarget(f"http://127.0.0.1%09:{PORT}/"), NatsTarget("nats://a%20b:4222", "s"),
     MqttTarget("mqtt://a^b:1883", "t"), RabbitMqTarget("amqp://a|b/", "k"), KafkaTarget(("a%3cb:1",), "t"),
     GrpcTarget("a%5cb:443", "a.B/C")],
)  # fmt: skip
def test_a_stored_target_is_refused_by_the_attempts_check(target: Any) -> None:
    """The executors run :func:`check_target` before each attempt: a job stored before the rule
    ends its attempts as ``error`` with this message, and nothing is sent."""
    with pytest.raises(InvalidInputError, match="which no host name may contain"):
        check_target(target)
