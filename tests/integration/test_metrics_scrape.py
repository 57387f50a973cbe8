"""A running `cronwheel server`'s /metrics, as Prometheus scrapes it: `promtool check metrics`
finds nothing to lint (names, help, units, counter suffixes), and the figures read at scrape time
(queue, shards, leader) and the API's request counts are there."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import httpx
import pytest
from server_harness import Sink, wait_for

pytestmark = pytest.mark.integration


def promtool() -> str:
    found = os.environ.get("PROMTOOL") or shutil.which("promtool")
    if found:
        return found
    message = "promtool not found (scripts/promtool installs Debian's prometheus package)"
    if os.environ.get("CI") or os.environ.get("CRONWHEEL_TEST_REQUIRE_BACKENDS"):
        pytest.fail(message)
    pytest.skip(message)


def sample(text: str, series: str) -> float:
    found = re.search(rf"^{re.escape(series)} (\S+)$", text, re.MULTILINE)
    assert found is not None, series
    return float(found.group(1))


async def test_a_running_servers_metrics_pass_promtool_check_metrics(
    api: httpx.AsyncClient, sink: Sink
) -> None:
    job = {
        "team": "it",
        "name": "scraped",
        "schedule": "* * * * * *",
        "target": {"type": "http", "url": sink.answer("/scraped", (200, 0))},
    }
    assert (await api.post("/v1/jobs", json=job)).status_code == 201
    await wait_for(lambda: len(sink.at("/scraped")) >= 2, timeout=10)
    text = ""

    async def finished() -> bool:
        nonlocal text
        text = (await api.get("/metrics")).text
        return 'cronwheel_runs_finished_total{queue="default",state="SUCCESS",team="it"}' in text

    await wait_for(finished, timeout=10)
    linted = subprocess.run(
        [promtool(), "check", "metrics"], input=text, capture_output=True, text=True, timeout=60, check=False
    )
    assert linted.returncode == 0, linted.stdout + linted.stderr
    assert sample(text, "cronwheel_shards_owned") == 256
    assert sample(text, "cronwheel_shards") == 256
    assert sample(text, "cronwheel_leader") == 1
    assert sample(text, 'cronwheel_queue_depth{queue="default"}') >= 0
    assert sample(text, 'cronwheel_queue_lag_seconds{queue="default"}') >= 0
    assert sample(text, "cronwheel_leader_elections_total") == 1
    created = 'cronwheel_api_requests_total{method="POST",route="/v1/jobs",status="201"}'
    assert sample(text, created) == 1
    assert sample(text, "cronwheel_fire_lateness_seconds_count") >= 2
