"""The endpoint of a node without the API: /metrics and /healthz only (cronwheel.node.metrics_http),
behind the API's Host check and, when the operator protects metrics, a token of every team."""

from __future__ import annotations

import httpx

from cronwheel.api.callers.access import AccessPolicy
from cronwheel.auth.identity import Caller, CallerKind, Scope
from cronwheel.errors import UnauthenticatedError
from cronwheel.node import metrics_http

NODE = "http://127.0.0.1:9103"


async def test_metrics_and_health_and_nothing_else() -> None:
    transport = httpx.ASGITransport(app=metrics_http.app)
    async with httpx.AsyncClient(transport=transport, base_url=NODE) as client:
        scraped = await client.get("/metrics")
        assert scraped.status_code == 200
        assert scraped.headers["content-type"].startswith("text/plain; version=")
        assert "cronwheel_fire_lateness_seconds_bucket" in scraped.text
        assert "cronwheel_start_lateness_seconds_count" in scraped.text
        assert (await client.get("/healthz")).json() == {"status": "ok"}
        assert (await client.get("/v1/jobs")).status_code == 404
        assert (await client.post("/metrics")).status_code == 405
        head = await client.head("/metrics")
        assert (head.status_code, head.content) == (200, b"")


async def test_a_host_the_node_does_not_serve_is_refused() -> None:
    endpoint = metrics_http.Endpoint(AccessPolicy(allowed_hosts=("worker-1",)))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=endpoint), base_url=NODE) as client:
        assert (await client.get("/metrics", headers={"Host": "rebind.attacker.example"})).status_code == 421
        assert (await client.get("/metrics", headers={"Host": "worker-1:9103"})).status_code == 200
        assert (await client.get("/healthz", headers={"Host": "rebind.attacker.example"})).status_code == 200


async def test_protected_metrics_need_a_token_of_every_team() -> None:
    callers = {
        "monitor": Caller(CallerKind.TOKEN, "m", "monitor", frozenset({Scope.READ}), None),
        "team": Caller(CallerKind.TOKEN, "t", "team", frozenset({Scope.ADMIN}), frozenset({"data"})),
    }

    async def authenticate(credential: str) -> Caller | None:
        if credential == "revoked":
            raise UnauthenticatedError("token t is revoked")
        return callers.get(credential)

    endpoint = metrics_http.Endpoint(AccessPolicy(protect_metrics=True), authenticate)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=endpoint), base_url=NODE) as client:
        for headers, status in [
            ({}, 401),
            ({"Authorization": "Bearer revoked"}, 401),
            ({"Authorization": "Bearer unknown"}, 401),
            ({"Authorization": "Basic bW9uaXRvcg=="}, 401),
            ({"Authorization": "Bearer team"}, 403),
            ({"Authorization": "Bearer monitor"}, 200),
        ]:
            answer = await client.get("/metrics", headers=headers)
            assert answer.status_code == status, headers
        assert answer.headers["content-type"].startswith("text/plain; version=")
        refused = await client.get("/metrics")
        assert refused.headers["www-authenticate"] == 'Bearer realm="cronwheel"'
        assert (await client.get("/healthz")).status_code == 200
