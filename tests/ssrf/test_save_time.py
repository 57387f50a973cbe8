"""The SSRF corpus when a job is written: every refused spelling answers 422 on ``target.url``,
whatever the write (create, replace, patch), names no secret of the URL, and writes nothing.
Before the host was read as the HTTP client and the resolver read it, 15 of these spellings
(``localhost.``, ``0x7f000001``, ``2130706433``, ``0177.0.0.1``, ``127.1``, ``0``, ``[::7f00:1]``,
``[64:ff9b::7f00:1]``, ``[2002:7f00:1::]``, ``169.254.169.254.``, full-width digits, ideographic
dots ...) were stored and refused only at send time."""

from __future__ import annotations

from dataclasses import replace

import httpx
import pytest

from api.conftest import Env, job_body
from cronwheel.errors import InvalidInputError
from cronwheel.model import HttpTarget, Job
from cronwheel.store import JobQuery

from .corpus import ACCEPTED, REFUSED, RESOLVED

SECRETS = ("HUNTER2", "s3cr3t", "pass@")
PORT = 8080


def url_of(template: str) -> str:
    return "http://" + template.format(port=PORT)


@pytest.mark.parametrize(("why", "template"), REFUSED, ids=[why for why, _ in REFUSED])
async def test_refused_when_written(client: httpx.AsyncClient, env: Env, why: str, template: str) -> None:
    target = {"type": "http", "url": url_of(template)}
    created = await client.post("/v1/jobs", json=job_body(target=target))
    assert created.status_code == 422, (why, created.text)
    problem = created.json()
    assert problem["type"] in ("urn:cronwheel:problem:target-refused", "urn:cronwheel:problem:validation")
    assert {error["field"] for error in problem["errors"]} == {"target.url"}, problem
    for secret in SECRETS:
        assert secret not in created.text
    assert (await env.store.list_jobs(JobQuery())).items == []
    assert env.changes.empty()


async def test_refused_when_replaced_or_patched(client: httpx.AsyncClient, env: Env) -> None:
    job = (await client.post("/v1/jobs", json=job_body())).json()
    path = f"/v1/jobs/{job['id']}"
    for _, template in REFUSED:
        target = {"type": "http", "url": url_of(template)}
        replaced = await client.put(path, json=job_body(target=target))
        patched = await client.patch(path, json={"target": target})
        assert (replaced.status_code, patched.status_code) == (422, 422), template
    stored = await env.store.get_job(job["id"])
    assert stored.version == 1


@pytest.mark.parametrize("template", ACCEPTED)
async def test_public_spellings_are_accepted(client: httpx.AsyncClient, env: Env, template: str) -> None:
    # user info is a credential in clear, which only --allow-plain-credentials lets a job hold
    env.service.policy = replace(env.service.policy, allow_plain_credentials=True)
    target = {"type": "http", "url": "https://" + template}
    response = await client.post("/v1/jobs", json=job_body(target=target))
    assert response.status_code == 201, response.text


async def test_names_are_left_to_the_resolver(client: httpx.AsyncClient) -> None:
    """A name's addresses are only known when it is looked up: they are judged at every attempt
    (``test_send_time.py``), not when the job is written."""
    for index, (_, name, _) in enumerate(RESOLVED):
        target = {"type": "http", "url": f"https://{name}/x"}
        response = await client.post("/v1/jobs", json=job_body(name=f"n{index}", target=target))
        assert response.status_code == 201, response.text


@pytest.mark.parametrize(("why", "template"), REFUSED, ids=[why for why, _ in REFUSED])
def test_the_service_refuses_for_every_writer(env: Env, why: str, template: str) -> None:
    job = Job(id="", team="data", name="n", schedule="0 3 * * *", target=HttpTarget(url=url_of(template)))
    with pytest.raises(InvalidInputError) as refused:
        env.service.validate(job)
    assert str(refused.value).startswith("target.url"), why
    for secret in SECRETS:
        assert secret not in str(refused.value)


def test_an_operator_allows_a_network_in_every_spelling(env: Env) -> None:
    env.service.policy = type(env.service.policy)(allowed_networks=("127.0.0.0/8",))
    for template in ("127.0.0.1:1/", "[::ffff:127.0.0.1]:1/", "localhost:1/", "hooks.localhost.:1/"):
        job = Job(id="", team="d", name="n", schedule="0 3 * * *", target=HttpTarget(url=url_of(template)))
        env.service.validate(job)
