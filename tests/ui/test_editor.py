"""The dashboard's job form in a real headless Chromium against a real ``cronwheel server``: a job of
every target kind the API's schema names is made through the form alone (no JSON typed: texts,
choices, rows, secrets chosen by name) and read back over the API with the fields as entered; a
refused value's error appears under its own field as it is typed and goes when fixed; the schedule's
next fires are marked where a DST change moves them; the JSON and YAML views and the form edit one
document (a key the form does not know survives form -> JSON -> form), and what is edited as text
is saved as written. Every wait is for an element or a state, never a sleep.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest
from playwright.async_api import Browser, Page, expect
from server_harness import ServerProcess

from .job_form import control_id, fill, fill_job
from .session import admin_page, screenshot

pytestmark = [pytest.mark.integration, pytest.mark.browser]
SECRETS = ("hook-token", "broker-password")

# One target of each kind, as a user enters it (a secret by name where a value may be one).
TARGETS: dict[str, dict[str, Any]] = {
    "http": {
        "type": "http",
        "url": "http://127.0.0.1:9/hook",
        "method": "PUT",
        "headers": {"X-Team": "data", "Authorization": {"secret": "hook-token"}},
        "expected_status": [200, 202],
        "signing_secret": {"secret": "hook-token"},
    },
    "command": {
        "type": "command",
        "argv": ["/bin/echo", "hello world"],
        "env": {"GREETING": "hi", "TOKEN": {"secret": "hook-token"}},
        "cwd": "/tmp",
    },
    "python": {"type": "python", "function": "reports.jobs:nightly"},
    "grpc": {
        "type": "grpc",
        "address": "127.0.0.1:50051",
        "method": "demo.Greeter/SayHello",
        "tls": True,
        "metadata": {"x-team": "data", "x-token": {"secret": "hook-token"}},
    },
    "nats": {
        "type": "nats",
        "url": "nats://127.0.0.1:4222",
        "subject": "jobs.report",
        "jetstream": True,
        "headers": {"X-Team": "data"},
        "user": "bot",
        "password": {"secret": "broker-password"},
    },
    "mqtt": {
        "type": "mqtt",
        "url": "mqtt://127.0.0.1:1883",
        "topic": "jobs/report",
        "qos": 2,
        "retain": True,
        "username": "bot",
        "password": {"secret": "broker-password"},
    },
    "rabbitmq": {
        "type": "rabbitmq",
        "url": "amqp://127.0.0.1:5672/",
        "exchange": "reports",
        "routing_key": "nightly",
        "headers": {"X-Team": "data"},
        "username": "bot",
        "password": {"secret": "broker-password"},
    },
    "kafka": {
        "type": "kafka",
        "bootstrap_servers": ["127.0.0.1:9092", "127.0.0.2:9092"],
        "topic": "reports",
        "key": "nightly",
        "tls": True,
        "sasl_mechanism": "SCRAM-SHA-256",
        "username": "bot",
        "password": {"secret": "broker-password"},
    },
}


@pytest.fixture
async def server(server_factory: Callable[..., ServerProcess]) -> ServerProcess:
    server = server_factory("--allow-commands", "--allow-python", "reports.*:*", "--allow-plain-credentials")
    async with server.client() as api:
        for name in SECRETS:
            answer = await api.put(f"/v1/teams/data/secrets/{name}", json={"value": f"value-of-{name}"})
            assert answer.status_code in (200, 201), answer.text
    return server


@pytest.fixture
async def page(server: ServerProcess, browser: Browser) -> AsyncIterator[Page]:
    context, opened, errors = await admin_page(browser, server)
    yield opened
    assert errors == []
    await context.close()


async def _new_job(page: Page) -> None:
    await page.click("[data-nav=new]")
    await expect(page.locator("#job-form")).to_have_attribute("data-valid", re.compile("true|false"))
    await page.fill("#field-team", "data")


def _subset(entered: Any, stored: Any) -> bool:
    """Whether every value ``entered`` holds is in ``stored`` as entered (the rest: defaults)."""
    if isinstance(entered, dict):
        return isinstance(stored, dict) and all(
            key in stored and _subset(value, stored[key]) for key, value in entered.items()
        )
    return bool(entered == stored)


async def test_a_job_of_each_target_kind_is_made_through_the_form(server: ServerProcess, page: Page) -> None:
    for kind, target in TARGETS.items():
        await _new_job(page)
        kinds = await page.locator(f"{control_id('target')} option").all_inner_texts()
        assert set(TARGETS) <= set(kinds)  # every kind of the API's schema is offered
        entered = {
            "name": f"{kind}-job",
            "schedule": "0 3 * * *",
            "timezone": "Europe/Berlin",
            "target": target,
            "labels": {"tier": "gold", "kind": kind},
            "timeout_s": 12.5,
            "overlap": "forbid",
            "retry": {"max_attempts": 3, "initial_delay_s": 2},
            "misfire": {"policy": "catch_up", "max_catch_up": 4},
            "retention": {"keep_days": 7},
        }
        await fill_job(page, entered)
        await expect(page.locator("#job-form")).to_have_attribute("data-valid", "true")
        await expect(page.locator("#form-errors")).to_have_text("")
        assert "value-of-" not in await page.content()  # secrets by name only, never a value
        if kind == "http":
            await screenshot(page, "editor")
        await page.click("#save")
        await expect(page.locator("h1")).to_contain_text(f"Job data/{kind}-job")
        async with server.client() as api:
            (job,) = (await api.get("/v1/jobs", params={"name": f"{kind}-job"})).json()["items"]
            stored = (await api.get(f"/v1/jobs/{job['id']}")).json()
        assert _subset(entered, stored), f"{kind}: {json.dumps(stored, indent=1)}"
        assert stored["target"]["type"] == kind


async def test_a_refused_value_is_named_under_its_own_field_as_it_is_typed(page: Page) -> None:
    await _new_job(page)
    await page.fill("#field-name", "checked")
    await expect(page.locator("#job-form")).to_have_attribute("data-valid", "true")

    await fill(page, "retry.max_attempts", 0)
    await expect(page.locator("#error-retry-max_attempts")).to_contain_text("greater than or equal to 1")
    invalid = re.compile(r"\binvalid\b")
    await expect(page.locator('.field[data-path="retry.max_attempts"]')).to_have_class(invalid)
    await expect(page.locator("#error-retry-initial_delay_s")).to_have_text("")
    await fill(page, "timeout_s", "soon")  # typed as it is: the API says what it wants
    await expect(page.locator("#error-timeout_s")).to_contain_text("number")
    await fill(page, "target.url", "ftp://example.com/x")
    await expect(page.locator("#error-target-url")).not_to_have_text("")
    await expect(page.locator("#form-errors")).to_have_text("")  # each error is under its field

    await fill(page, "retry.max_attempts", 2)
    await fill(page, "timeout_s", 30)
    await fill(page, "target.url", "https://example.com/hook")
    await expect(page.locator("#error-retry-max_attempts")).to_have_text("")
    await expect(page.locator("#job-form")).to_have_attribute("data-valid", "true")


async def test_the_next_fires_are_marked_where_dst_moves_them(page: Page) -> None:
    await _new_job(page)
    await page.fill("#field-name", "sundays")
    await page.fill("#field-schedule", "30 2 * 3 0")  # Sundays of March, 02:30: one falls in the gap
    await page.fill("#field-timezone", "Europe/Berlin")
    await expect(page.locator("#schedule-words")).to_contain_text("02:30")
    fires = page.locator("#schedule-fires li")
    await expect(fires.first).to_be_visible()
    await expect(page.locator("#schedule-fires li .dst").first).to_contain_text("DST")
    assert await page.locator("#schedule-fires li .dst").count() < await fires.count()


async def test_the_json_view_round_trips_with_the_form(server: ServerProcess, page: Page) -> None:
    await _new_job(page)
    await fill_job(page, {"name": "round-trip", "schedule": "15 4 * * *", "labels": {"tier": "gold"}})
    await expect(page.locator("#job-form")).to_have_attribute("data-valid", "true")
    await page.click("#view-json")
    document = json.loads(await page.input_value("#job-json"))
    assert document["labels"] == {"tier": "gold"}
    assert document["target"]["type"] == "http"

    # edited in JSON: another kind, policies, and a key the form does not know
    document |= {
        "target": {"type": "mqtt", "url": "mqtt://127.0.0.1:1883", "topic": "t/1", "qos": 2},
        "retry": {"max_attempts": 5, "jitter": False},
        "payload": {"report": ["a", "b"], "nested": {"n": 1}},
        "x_unknown": {"kept": True},
    }
    await page.fill("#job-json", json.dumps(document))
    await expect(page.locator("#form-errors")).to_contain_text("x_unknown")  # the API refuses it
    await page.click("#view-form")
    await expect(page.locator(control_id("target"))).to_have_value("mqtt")
    await expect(page.locator(control_id("target.topic"))).to_have_value("t/1")
    await expect(page.locator(control_id("retry.max_attempts"))).to_have_value("5")
    await expect(page.locator(control_id("retry.jitter"))).not_to_be_checked()
    await page.click("#view-json")
    assert json.loads(await page.input_value("#job-json")) == document  # nothing lost, unknown key included

    del document["x_unknown"]
    await page.fill("#job-json", json.dumps(document))

    # the same document as YAML: text that does not parse is named and kept; an edit reaches the form
    await page.click("#view-yaml")
    text = await page.input_value("#job-yaml")
    assert "topic: t/1" in text
    await page.fill("#job-yaml", "team: [data")
    await expect(page.locator("#error-yaml")).to_contain_text("not YAML")
    await page.click("#view-form")
    await expect(page.locator("#form-view")).to_be_hidden()  # not left while unreadable
    await page.fill("#job-yaml", text.replace("topic: t/1", "topic: 'yes'") + "description: on\n")
    await expect(page.locator("#error-yaml")).to_have_text("")
    await page.click("#view-form")
    await expect(page.locator(control_id("target.topic"))).to_have_value("yes")
    await expect(page.locator(control_id("description"))).to_have_value("on")  # YAML 1.2: text
    document |= {"target": document["target"] | {"topic": "yes"}, "description": "on"}
    await fill(page, "target.retain", True)  # and one more change in the form
    await expect(page.locator("#job-form")).to_have_attribute("data-valid", "true")
    await page.click("#view-json")
    saved = json.loads(await page.input_value("#job-json"))
    assert saved == document | {"target": document["target"] | {"retain": True}}
    await page.click("#save")
    await expect(page.locator("h1")).to_contain_text("Job data/round-trip")
    async with server.client() as api:
        (job,) = (await api.get("/v1/jobs", params={"name": "round-trip"})).json()["items"]
        stored = (await api.get(f"/v1/jobs/{job['id']}")).json()
    assert _subset(saved, stored), json.dumps(stored, indent=1)

    # the edit page draws the stored job: its JSON is the stored definition
    await page.click("#edit")
    await expect(page.locator(control_id("target.topic"))).to_have_value("yes")
    await page.click("#view-json")
    assert _subset(saved, json.loads(await page.input_value("#job-json")))
