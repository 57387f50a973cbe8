"""Targets that nothing could run are refused when written (``cronwheel.targets.checks``), by the service,
so every writer gets the refusal: a 422 problem+json naming the field on the API, and nothing
written. Before, a NUL byte in an argument was stored and made every attempt raise inside the
worker."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from cronwheel.errors import InvalidInputError
from cronwheel.jobs.service import TargetPolicy
from cronwheel.model import CommandTarget, HttpTarget, Job, PythonTarget, Target
from cronwheel.store import JobQuery
from cronwheel.targets.checks import MAX_ARG_BYTES, MAX_EXEC_BYTES
from cronwheel.targets.kinds import check_target

from .conftest import Env, job_body

PROBLEM = "application/problem+json"
URL = "https://hooks.example.com/x"
EXEC_BYTES = len("/bin/echo") + 1 + 8 + 300 * (4096 + 1 + 8)  # each string, its NUL, its pointer
TOO_MANY_BYTES = f"take {EXEC_BYTES} bytes to start the program; at most {MAX_EXEC_BYTES}"


def command(**fields: Any) -> dict[str, Any]:
    return {"type": "command", "argv": ["/usr/bin/backup", "--full"], **fields}


def http(**fields: Any) -> dict[str, Any]:
    return {"type": "http", "url": URL, **fields}


UNSTORABLE = "contains a character no store can hold"  # NUL: refused at the boundary (api.storable)
# (target of a body the API's schema accepts, the refusal's detail)
REFUSED: list[tuple[dict[str, Any], str]] = [
    (command(argv=["/usr/bin/backup", "a\u0000b"]), f"target.argv.1: {UNSTORABLE}"),
    (command(argv=["/usr/bin/back\u0000up"]), f"target.argv.0: {UNSTORABLE}"),
    (command(env={"TOKEN": "s3cr3t\u0000"}), f"target.env.TOKEN: {UNSTORABLE}"),
    (command(cwd="/srv\u0000/data"), f"target.cwd: {UNSTORABLE}"),
    (command(cwd="srv/data"), "target.cwd must be an absolute path"),
    (command(argv=["/bin/echo"] + ["x" * 4096] * 300), TOO_MANY_BYTES),
    (http(url="https://hooks.example.com/\u0000"), f"target.url: {UNSTORABLE}"),
    (http(url="https://hooks.example.com/a\nb"), "target.url contains a control character"),
    (http(url="https://[::1/hook"), "target.url is not a valid URL"),  # urlsplit raises: a 422, not a 500
    (http(url="https://xn--/hook"), "target.url is not a valid URL"),
    (http(url="https://hooks..example.com/"), "target.url has a host name that cannot be looked up"),
    (http(url=f"https://{'a' * 64}.example.com/"), "target.url has a host name that cannot be looked up"),
    (http(headers={"X-Token": "a\u0001b"}), "target.headers['X-Token'] contains a control character"),
    (http(headers={"X-Token": "a\u007fb"}), "target.headers['X-Token'] contains a control character"),
    (
        http(url="https://u:s3cr3t@hooks.example.com/x", headers={"Authorization": "Bearer s3cr3t"}),
        "target.url has user info and target.headers an Authorization header",
    ),
    (http(url="https://134744072/x"), "target.url has the IPv4 address 8.8.8.8 spelled '134744072'"),
    (http(url="https://0x08080808/x"), "write it as 8.8.8.8"),
]


@pytest.fixture
def commands_allowed(env: Env) -> Env:
    env.service.policy = TargetPolicy(allow_commands=True, python_allow=("myapp.*",))
    return env


@pytest.mark.parametrize(("target", "detail"), REFUSED, ids=[detail for _, detail in REFUSED])
async def test_refused_when_created(
    client: httpx.AsyncClient, commands_allowed: Env, target: dict[str, Any], detail: str
) -> None:
    response = await client.post("/v1/jobs", json=job_body(target=target))
    assert response.status_code == 422, response.text
    assert response.headers["content-type"] == PROBLEM
    problem = response.json()
    assert problem["status"] == 422
    assert problem["type"].startswith("urn:cronwheel:problem:")
    assert problem["instance"] == "/v1/jobs"
    assert detail in problem["detail"]
    assert "s3cr3t" not in response.text  # values are never echoed (they may be secrets)
    assert (await commands_allowed.store.list_jobs(JobQuery())).items == []
    assert commands_allowed.changes.empty()


async def test_refused_when_replaced_and_patched(client: httpx.AsyncClient, commands_allowed: Env) -> None:
    created = (await client.post("/v1/jobs", json=job_body(target=command()))).json()
    assert created.get("id"), created
    path = f"/v1/jobs/{created['id']}"
    bad = command(env={"TOKEN": "a\u0001"}, cwd="srv/data")
    replaced = await client.put(path, json=job_body(target=bad))
    patched = await client.patch(path, json={"target": bad})
    for response in (replaced, patched):
        assert response.status_code == 422, response.text
        assert response.json()["detail"] == "target.cwd must be an absolute path"
    stored = await commands_allowed.store.get_job(created["id"])
    assert (stored.version, stored.target) == (1, CommandTarget(argv=("/usr/bin/backup", "--full")))


async def test_what_the_os_and_client_take_is_accepted(
    client: httpx.AsyncClient, commands_allowed: Env
) -> None:
    """The limits are the system's, not stricter: tabs and UTF-8 in headers, a cwd that does not
    exist yet (that is a fault of the attempt), arguments up to the exec limit."""
    bodies = [
        command(argv=["/bin/echo", "é 中 \t $HOME; rm -rf /"], env={"EMPTY": ""}, cwd="/not/created/yet"),
        command(argv=["/bin/echo"] + ["x" * 4096] * 200),
        http(url="https://xn--bcher-kva.example/?q=a b", headers={"X-Note": "caf\u00e9\tdu coin"}),
        http(url="https://[2606:4700:4700::1111]:8443/hook"),
    ]
    for index, target in enumerate(bodies):
        response = await client.post("/v1/jobs", json=job_body(name=f"ok{index}", target=target))
        assert response.status_code == 201, response.text


# -- the service, for writers other than the API (its schema refuses these before) -----------------


def job(target: Target) -> Job:
    return Job(id="", team="data", name="nightly", schedule="0 3 * * *", target=target)


SERVICE_REFUSED: list[tuple[Target, str]] = [
    (CommandTarget(argv=()), "target.argv must not be empty"),
    (CommandTarget(argv=("",)), "target.argv[0] (the program) must not be empty"),
    (CommandTarget(argv=("/bin/echo", "\ud800")), "target.argv[1] is not valid Unicode text"),
    (CommandTarget(argv=("/bin/echo",), env=(("A=B", "x"),)), "target.env['A=B']: a variable name cannot"),
    (CommandTarget(argv=("/bin/echo",), env=(("", "x"),)), "target.env has an empty variable name"),
    (
        CommandTarget(argv=("/bin/echo",), env=(("A\0", "x"),)),
        "target.env['A\\x00'] (the name) contains a NUL",
    ),
    (
        CommandTarget(argv=("/bin/echo", "x" * (MAX_ARG_BYTES + 1))),
        f"target.argv[1] is {MAX_ARG_BYTES + 1} bytes",
    ),
    (
        CommandTarget(argv=("/bin/echo",), env=(("BIG", "é" * (MAX_ARG_BYTES // 2)),)),
        f"target.env['BIG'] is {4 + MAX_ARG_BYTES // 2 * 2} bytes",
    ),
    (HttpTarget(url=URL, method="GET /x"), "target.method must be an HTTP method name"),
    (
        HttpTarget(url=URL, headers=(("Bad Name", "v"),)),
        "target.headers has a name that is not an HTTP token",
    ),
    (HttpTarget(url=URL, headers=(("X", "\udc80"),)), "target.headers['X'] is not valid Unicode text"),
    (HttpTarget(url="https://hooks.example.com/\udc80"), "target.url is not valid Unicode text"),
    (HttpTarget(url="ftp://hooks.example.com/"), "target.url must be an absolute http:// or https:// URL"),
    (PythonTarget("myapp.jobs"), "target.function must be 'package.module:function'"),
    (PythonTarget("myapp.jobs:run:now"), "target.function must be 'package.module:function'"),
    (PythonTarget("myapp..jobs:run"), "target.function must be 'package.module:function'"),
    (PythonTarget("myapp.jobs:1run"), "target.function must be 'package.module:function'"),
    (PythonTarget("myapp.jobs:run\0"), "target.function must be 'package.module:function'"),
    (PythonTarget("myapp.jobs:Report.run"), "target.function must be 'package.module:function'"),
    (PythonTarget("myapp.jobs:__class__"), "target.function must be 'package.module:function'"),
    (
        PythonTarget("pty:spawn"),
        "python target 'pty:spawn' is not allowed: pty is in the standard library, never a target",
    ),
]


@pytest.mark.parametrize(("target", "message"), SERVICE_REFUSED, ids=[m for _, m in SERVICE_REFUSED])
async def test_service_refuses(commands_allowed: Env, target: Target, message: str) -> None:
    with pytest.raises(InvalidInputError) as refused:
        await commands_allowed.service.create(job(target))
    assert str(refused.value).startswith(message)
    assert (await commands_allowed.store.list_jobs(JobQuery())).items == []


@pytest.mark.parametrize(
    "target",
    [
        CommandTarget(argv=("backup",), env=(("lower.case-name", "x"), ("PATH", "")), cwd="/"),
        HttpTarget(url="http://hooks.example.com./x", method="PURGE", headers=(("X", "\u4e2d"),)),
        PythonTarget("myapp.jobs:_run"),
        PythonTarget("myapp.t\u00e2ches:ex\u00e9cuter"),  # non-ASCII identifiers import fine
    ],
)
def test_accepted_by_the_check(target: Target) -> None:
    check_target(target)


async def test_a_target_nothing_could_run_joins_the_other_errors_in_one_round(
    client: httpx.AsyncClient, commands_allowed: Env
) -> None:
    body = job_body(schedule="61 * * * *", target=command(cwd="srv/s3cr3t"))
    response = await client.post("/v1/jobs", json=body)
    assert response.status_code == 422, response.text
    errors = {error["field"]: error for error in response.json()["errors"]}
    assert set(errors) == {"schedule", "target.cwd"}
    assert errors["target.cwd"]["code"] == "target_invalid"
    assert errors["target.cwd"]["message"] == "target.cwd must be an absolute path"
    assert "s3cr3t" not in response.text  # the refused value is not echoed
    assert (await commands_allowed.store.list_jobs(JobQuery())).items == []
