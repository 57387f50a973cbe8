"""The endpoint of a node without the API: /metrics and /healthz only (cronwheel.metrics_http)."""

from __future__ import annotations

import httpx

from cronwheel import metrics_http


async def test_metrics_and_health_and_nothing_else() -> None:
    transport = httpx.ASGITransport(app=metrics_http.app)
    async with httpx.AsyncClient(transport=transport, base_url="http://node") as client:
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
