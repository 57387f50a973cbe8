"""A running command's output so far, through a real ``cronwheel server``: the run's answer shows
its first line while the command sleeps before its second, the run's event stream carries it as
an ``output`` event, and the attempt's final record replaces it."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
from server_harness import ServerProcess, wait_for

pytestmark = pytest.mark.integration

SCRIPT = "echo first; sleep 3; echo second"


async def _first_output_event(api: httpx.AsyncClient, run_id: str) -> dict[str, Any]:
    """The first ``output`` event of the run's stream (``run:ID``)."""
    async with api.stream("GET", "/v1/events", params={"topics": f"run:{run_id}"}, timeout=10) as answer:
        assert answer.status_code == 200
        kind = None
        async for line in answer.aiter_lines():
            if line.startswith("event: "):
                kind = line.removeprefix("event: ")
            elif line.startswith("data: ") and kind == "output":
                data: dict[str, Any] = json.loads(line.removeprefix("data: "))
                return data
    raise AssertionError("the stream ended without an output event")


async def test_a_running_commands_output_so_far_is_in_its_run_and_its_events(
    server_factory: Callable[..., ServerProcess],
) -> None:
    server = server_factory("--allow-commands")
    async with server.client() as api:
        target = {"type": "command", "argv": ["sh", "-c", SCRIPT]}
        spec = {"team": "it", "name": "talker", "schedule": "@daily", "target": target}
        job = (await api.post("/v1/jobs", json=spec)).json()
        run = (await api.post(f"/v1/jobs/{job['id']}/trigger", json={})).json()
        event = await _first_output_event(api, run["id"])
        assert (event["id"], event["attempt"], event["team"]) == (run["id"], 1, "it")
        assert event["output"] == "first\n"

        async def so_far() -> dict[str, Any] | None:
            found: dict[str, Any] = (await api.get(f"/v1/runs/{run['id']}")).json()
            attempts = found["attempt_details"]
            return found if attempts and attempts[0]["output"] == "first\n" else None

        running = await wait_for(so_far, timeout=2)
        assert running["state"] == "RUNNING"
        assert running["attempt_details"][0]["finished_at"] is None
        assert running["attempt_details"][0]["output_at"] is not None
        logs = (await api.get(f"/v1/runs/{run['id']}/output")).json()["attempts"][0]
        assert (logs["output"], logs["kept"]) == ("first\n", "running")

        async def done() -> dict[str, Any] | None:
            found: dict[str, Any] = (await api.get(f"/v1/runs/{run['id']}")).json()
            return found if found["state"] == "SUCCESS" else None

        finished = await wait_for(done, timeout=6)
        attempt = finished["attempt_details"][0]
        assert (attempt["output"], attempt["output_at"]) == ("first\nsecond\n", None)
