"""Credentials in notification channel URLs: a Slack-compatible URL (its path is the token) and a
webhook URL with user info or a token in its query are refused by default, as a job's plain
credentials are (422 ``plain-credential`` naming the field, the value never echoed, nothing
written); ``--allow-plain-credentials`` stores them. A URL may be given as a reference to a team
secret holding it (one the team does not have: 422 ``secret-not-found``). Rules stored in clear
are kept by an edit that keeps them, and read masked by a caller without the ``write`` scope."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import httpx
import pytest

from cronwheel.auth.identity import Scope
from cronwheel.jobs.service import TargetPolicy
from cronwheel.model import SecretRef
from cronwheel.notifications import rules as notification_rules
from cronwheel.notifications.rules import (
    Condition,
    EmailChannel,
    Rule,
    SlackChannel,
    WebhookChannel,
    job_scope,
    rules_from_json,
    rules_to_json,
    team_scope,
)
from cronwheel.store.port import StoredSecret

from .conftest import Env, issue_token, job_body

TOKEN = "s3cr3t-t0k3n"
SLACK = f"https://hooks.slack.com/services/T000/B000/{TOKEN}"
HOOK = {"type": "webhook", "url": "https://hooks.example.com/cw?tenant=7"}  # no credential

# (a channel in clear, how a reader sees its URL)
PLAIN: list[tuple[dict[str, Any], str]] = [
    ({"type": "slack", "url": SLACK}, "https://hooks.slack.com/***"),
    ({"type": "slack", "url": f"https://chat.example.com:8443/hooks/{TOKEN}"}, "https://chat.example.com:8443/***"),
    ({"type": "webhook", "url": f"https://hooks.example.com/cw?token={TOKEN}&tenant=7"},
     "https://hooks.example.com/cw?token=***&tenant=***"),
    ({"type": "webhook", "url": f"https://bot:{TOKEN}@hooks.example.com/cw"}, "https://***@hooks.example.com/cw"),
]  # fmt: skip


def _rules(*channels: dict[str, Any]) -> dict[str, Any]:
    return {"rules": [{"conditions": ["failure"], "channels": list(channels)}]}


def _allow(env: Env, allowed: bool = True) -> None:
    env.service.policy = replace(env.service.policy, allow_plain_credentials=allowed)


@pytest.mark.parametrize(
    ("channel", "masked"), PLAIN, ids=["slack", "slack-port", "token-query", "user-info"]
)
async def test_refused_by_default(
    client: httpx.AsyncClient, env: Env, channel: dict[str, Any], masked: str
) -> None:
    job_id = (await client.post("/v1/jobs", json=job_body())).json()["id"]
    for path in ("/v1/teams/data/notifications", f"/v1/jobs/{job_id}/notifications"):
        response = await client.put(path, json=_rules(HOOK, channel))
        assert response.status_code == 422, response.text
        assert response.headers["content-type"] == "application/problem+json"
        problem = response.json()
        assert problem["type"].endswith("plain-credential")
        assert [(e["field"], e["code"]) for e in problem["errors"]] == [
            ("rules.0.channels.1.url", "plain_credential")
        ]
        assert '{"secret": NAME}' in problem["detail"]
        assert "--allow-plain-credentials" in problem["detail"]
        assert TOKEN not in response.text
    assert await env.store.notification_rules(team_scope("data")) is None
    assert await env.store.notification_rules(job_scope(job_id)) is None


@pytest.mark.parametrize(("channel", "masked"), PLAIN[:1] + PLAIN[2:3], ids=["slack", "token-query"])
async def test_accepted_when_the_operator_allows_them(
    client: httpx.AsyncClient, env: Env, channel: dict[str, Any], masked: str
) -> None:
    refused = await client.put("/v1/teams/data/notifications", json=_rules(channel))
    assert refused.status_code == 422, refused.text
    _allow(env)
    response = await client.put("/v1/teams/data/notifications", json=_rules(channel))
    assert response.status_code == 200, response.text
    assert response.json()["rules"][0]["channels"][0]["url"] == channel["url"]


async def test_a_url_given_as_a_secret_reference(client: httpx.AsyncClient, env: Env) -> None:
    await env.store.put_secret(StoredSecret("data", "slack-url", "k1", b"sealed"))
    channels: list[dict[str, Any]] = [
        {"type": "slack", "url": {"secret": "slack-url"}},
        {"type": "webhook", "url": {"secret": "slack-url"}, "signing_secret": None},
    ]
    put = await client.put("/v1/teams/data/notifications", json=_rules(*channels))
    assert put.status_code == 200, put.text
    assert put.json()["rules"][0]["channels"] == channels
    (rule,) = await env.store.notification_rules(team_scope("data")) or ()
    assert rule.channels == (SlackChannel(SecretRef("slack-url")), WebhookChannel(SecretRef("slack-url")))
    reader = await issue_token(env.store, Scope.READ, team="data", name="reader")
    async with env.client(reader) as http_reader:
        read = await http_reader.get("/v1/teams/data/notifications")
    assert read.json()["rules"][0]["channels"] == channels  # a reference is no credential: shown as it is
    for url in (
        {"secret": "no spaces"},
        {"secret": "a", "more": 1},
        {"name": "a"},
        {"secret": 7},
        "ftp://x/y",
    ):
        response = await client.put(
            "/v1/teams/data/notifications", json=_rules({"type": "slack", "url": url})
        )
        assert response.status_code == 422, response.text
        (entry,) = response.json()["errors"]
        assert entry["field"].startswith("rules.0.channels.0.")
        assert entry["field"].endswith(".url")


async def test_a_reference_to_a_secret_the_team_lacks_is_refused(client: httpx.AsyncClient, env: Env) -> None:
    await env.store.put_secret(StoredSecret("other", "slack-url", "k1", b"sealed"))  # another team's
    channels: list[dict[str, Any]] = [
        HOOK,
        {"type": "slack", "url": {"secret": "slack-url"}},
        {**HOOK, "signing_secret": "nope"},
    ]
    response = await client.put("/v1/teams/data/notifications", json=_rules(*channels))
    assert response.status_code == 422, response.text
    problem = response.json()
    assert problem["type"].endswith("secret-not-found")
    assert [(e["field"], e["code"]) for e in problem["errors"]] == [
        ("rules.0.channels.1.url", "secret_not_found"),
        ("rules.0.channels.2.signing_secret", "secret_not_found"),
    ]
    assert "cronwheel secrets set data/slack-url" in problem["detail"]
    assert await env.store.notification_rules(team_scope("data")) is None


async def test_an_edit_keeps_a_url_the_stored_rules_hold(client: httpx.AsyncClient, env: Env) -> None:
    _allow(env)
    slack = {"type": "slack", "url": SLACK}
    assert (await client.put("/v1/teams/data/notifications", json=_rules(slack))).status_code == 200
    _allow(env, False)
    assert not TargetPolicy().allow_plain_credentials  # the default
    read = (await client.get("/v1/teams/data/notifications")).json()  # an admin: reads them as stored
    assert read["rules"][0]["channels"][0]["url"] == SLACK
    read["rules"][0]["late_s"] = 120  # another field, and the stored URL moved to another rule
    read["rules"].insert(0, {"conditions": ["missed"], "channels": [HOOK]})
    kept = await client.put("/v1/teams/data/notifications", json={"rules": read["rules"]})
    assert kept.status_code == 200, kept.text
    other = {"type": "slack", "url": SLACK.replace("T000", "T001")}
    changed = await client.put("/v1/teams/data/notifications", json=_rules(slack, other))
    assert [e["field"] for e in changed.json()["errors"]] == ["rules.0.channels.1.url"]
    as_webhook = await client.put(
        "/v1/teams/data/notifications", json=_rules({"type": "webhook", "url": SLACK})
    )
    assert as_webhook.status_code == 200  # no credential for a webhook: no token in its query or user info
    job_id = (await client.post("/v1/jobs", json=job_body())).json()["id"]
    elsewhere = await client.put(f"/v1/jobs/{job_id}/notifications", json=_rules(slack))
    assert elsewhere.status_code == 422  # what the rules in that place hold, not another's


@pytest.mark.parametrize("scopes", [(Scope.READ,), (Scope.READ, Scope.TRIGGER)])
async def test_a_reader_sees_them_masked_and_a_writer_as_stored(
    client: httpx.AsyncClient, env: Env, scopes: tuple[Scope, ...]
) -> None:
    _allow(env)
    others: list[dict[str, Any]] = [HOOK, {"type": "email", "to": ["ops@example.com"]}]
    body = {"rules": [*_rules(*[channel for channel, _ in PLAIN])["rules"], *_rules(*others)["rules"]]}
    job_id = (await client.post("/v1/jobs", json=job_body())).json()["id"]
    for path in ("/v1/teams/data/notifications", f"/v1/jobs/{job_id}/notifications"):
        put = await client.put(path, json=body)
        assert put.status_code == 200, put.text
    reader = await issue_token(env.store, *scopes, team="data", name="reader")
    writer = await issue_token(env.store, Scope.READ, Scope.WRITE, team="data", name="writer")
    paths = ("/v1/teams/data/notifications", f"/v1/jobs/{job_id}/notifications",
             "/v1/teams/data/jobs/nightly/notifications")  # fmt: skip

    def urls(response: httpx.Response) -> list[list[Any]]:
        return [[channel.get("url") for channel in rule["channels"]] for rule in response.json()["rules"]]

    async with env.client(reader) as http_reader:
        read = [await http_reader.get(path) for path in paths]
    for response in read:
        assert response.status_code == 200, response.text
        assert TOKEN not in response.text
        assert urls(response) == [[masked for _, masked in PLAIN], [HOOK["url"], None]]
    async with env.client(writer) as http_writer:
        written = await http_writer.get(paths[1])
    assert urls(written) == [[channel["url"] for channel, _ in PLAIN], [HOOK["url"], None]]


def test_classification_and_masking() -> None:
    channel_credentials, masked_rules = (
        notification_rules.channel_credentials,
        notification_rules.masked_rules,
    )
    rules = rules_from_json(_rules(*[channel for channel, _ in PLAIN], HOOK)["rules"])
    referenced = Rule(
        frozenset({Condition.FAILURE}), (SlackChannel(SecretRef("s")), EmailChannel(("a@b.example",)))
    )
    assert [field for field, _, _ in channel_credentials((*rules, referenced))] == [
        f"rules.0.channels.{c}.url" for c in range(len(PLAIN))
    ]
    masked = masked_rules((*rules, referenced))
    assert [channel.url for channel in masked[0].channels if not isinstance(channel, EmailChannel)] == [
        *(shown for _, shown in PLAIN),
        HOOK["url"],
    ]
    assert masked[1] == referenced
    assert rules_from_json(rules_to_json((referenced,))) == (referenced,)  # and a plain string still reads
