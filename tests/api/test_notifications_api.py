"""Notification rules through the API: a team default, a job's own rules in its place, refusals
as problem+json naming the field (nothing written), and a queued test notification."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import httpx

from cronwheel.auth.identity import Scope
from cronwheel.notifications.rules import team_scope
from cronwheel.store.port import StoredSecret

from .conftest import Env, issue_token, job_body

HOOK = {"type": "webhook", "url": "https://hooks.example.com/cw"}
RULE = {
    "conditions": ["failure", "recovery"],
    "channels": [HOOK, {"type": "email", "to": ["ops@example.com"]}],
}


def _rules(*rules: dict[str, Any]) -> dict[str, Any]:
    return {"rules": list(rules)}


async def test_team_default_then_a_job_rule_in_its_place(client: httpx.AsyncClient, env: Env) -> None:
    await env.store.put_secret(StoredSecret("data", "slack-url", "k1", b"sealed"))
    created = await client.post("/v1/jobs", json=job_body())
    job_id = created.json()["id"]
    assert (await client.get("/v1/teams/data/notifications")).json() == {"rules": [], "source": "none"}
    put = await client.put("/v1/teams/data/notifications", json=_rules(RULE))
    assert put.status_code == 200
    stored = put.json()["rules"][0]
    assert (stored["deadline_s"], stored["late_s"], stored["channels"][0]["signing_secret"]) == (
        300.0,
        60.0,
        None,
    )
    job = await client.get(f"/v1/jobs/{job_id}/notifications")
    assert (job.json()["source"], job.json()["rules"]) == ("team", put.json()["rules"])
    missed = {"conditions": ["missed"], "channels": [{"type": "slack", "url": {"secret": "slack-url"}}],
              "deadline_s": 600}  # fmt: skip
    own = await client.put("/v1/teams/data/jobs/nightly/notifications", json=_rules(missed))
    assert own.status_code == 200
    assert own.json()["source"] == "job"
    in_force = (await client.get(f"/v1/jobs/{job_id}/notifications")).json()["rules"][0]
    assert (in_force["deadline_s"], in_force["channels"][0]["url"]) == (600, {"secret": "slack-url"})
    assert (await client.delete(f"/v1/jobs/{job_id}/notifications")).status_code == 204
    assert (await client.get(f"/v1/jobs/{job_id}/notifications")).json()["source"] == "team"
    assert (await client.put("/v1/teams/data/notifications", json=_rules())).json()["source"] == "none"


async def test_refusals_name_the_field_and_write_nothing(client: httpx.AsyncClient, env: Env) -> None:
    cases = [
        ({"conditions": ["failure"], "channels": [{"type": "webhook", "url": "http://127.0.0.1:9/x"}]},
         "target_refused", "rules.0.channels.0.url"),
        ({"conditions": ["failure"], "channels": [HOOK, {**HOOK, "signing_secret": "nope"}]},
         "secret_not_found", "rules.0.channels.1.signing_secret"),
        ({"conditions": ["failure"], "channels": [{"type": "webhook", "url": "http:///no-host"}]},
         "target_invalid", "rules.0.channels.0.url"),
    ]  # fmt: skip
    for rule, code, field in cases:
        response = await client.put("/v1/teams/data/notifications", json=_rules(rule))
        assert response.status_code == 422, response.text
        assert response.headers["content-type"] == "application/problem+json"
        (entry,) = response.json()["errors"]
        assert (entry["code"], entry["field"]) == (code, field)
    schema_refusals: list[dict[str, Any]] = [
        {"conditions": ["sometimes"], "channels": [HOOK]},
        {"conditions": ["failure"], "channels": []},
        {"conditions": ["failure"], "channels": [{"type": "email", "to": ["not an address"]}]},
        {"conditions": ["late"], "channels": [HOOK], "late_s": 0},
    ]
    for bad in schema_refusals:
        assert (await client.put("/v1/teams/data/notifications", json=_rules(bad))).status_code == 422
    assert await env.store.notification_rules(team_scope("data")) is None


async def test_another_teams_rules_are_not_found_and_read_scope_cannot_write(env: Env) -> None:
    other = await issue_token(env.store, Scope.READ, Scope.WRITE, team="other")
    reader = await issue_token(env.store, Scope.READ, team="data")
    async with env.client(other) as client:
        assert (await client.get("/v1/teams/data/notifications")).status_code == 404
    async with env.client(reader) as client:
        assert (await client.get("/v1/teams/data/notifications")).status_code == 200
        assert (await client.put("/v1/teams/data/notifications", json=_rules(RULE))).status_code == 403


async def test_a_test_notification_is_queued_for_each_channel(client: httpx.AsyncClient, env: Env) -> None:
    await client.post("/v1/jobs", json=job_body())
    none = await client.post("/v1/teams/data/notifications/test", json={})
    assert (none.status_code, none.json()["channels"]) == (202, 0)
    await client.put("/v1/teams/data/notifications", json=_rules(RULE))
    sent = await client.post("/v1/teams/data/notifications/test", json={"job": "nightly"})
    assert sent.status_code == 202
    assert sent.json()["channels"] == 2
    rows = await env.store.outbox()
    assert {row["event"] for row in rows} == {"test"}
    assert {row["notification_id"] for row in rows} == {sent.json()["notification_id"]}
    assert (await client.post("/v1/teams/data/notifications/test", json={"job": "nope"})).status_code == 404


async def test_rule_changes_are_audited_without_the_urls_secret_parts(
    client: httpx.AsyncClient, env: Env
) -> None:
    from cronwheel.audit import AuditQuery

    env.service.policy = replace(env.service.policy, allow_plain_credentials=True)
    created = (await client.post("/v1/jobs", json=job_body())).json()
    slack = {"type": "slack", "url": "https://hooks.slack.com/services/T00/B00/s3cr3t-t0k3n?x=1"}
    team_rule = _rules({"conditions": ["failure"], "channels": [slack]})
    steps = [
        ("PUT", "/v1/teams/data/notifications", team_rule),
        ("PUT", f"/v1/jobs/{created['id']}/notifications", _rules()),
        ("DELETE", f"/v1/jobs/{created['id']}/notifications", None),
        ("DELETE", f"/v1/jobs/{created['id']}/notifications", None),  # nothing left to drop: no entry
    ]
    for method, path, body in steps:
        env.clock.advance(1)
        response = await client.request(method, path, json=body)
        assert response.status_code in (200, 204), response.text
    entries = list(reversed((await env.store.list_audit(AuditQuery(action="notifications"))).items))
    assert [(e.action.value, e.team, e.target_id) for e in entries] == [
        ("notifications.set", "data", "team:data"),
        ("notifications.set", "data", f"job:{created['id']}"),
        ("notifications.delete", "data", f"job:{created['id']}"),
    ]
    assert entries[0].before is None
    channel = {"type": "slack", "url": "https://hooks.slack.com/..."}
    rule = {"conditions": ["failure"], "channels": [channel], "deadline_s": 300.0, "late_s": 60.0}
    assert entries[0].after == {"rules": [rule]}
    assert (entries[2].before, entries[2].after) == ({"rules": []}, None)
    assert "s3cr3t" not in repr([(e.before, e.after) for e in entries])
