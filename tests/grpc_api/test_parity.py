"""What the gRPC API shares with REST, which it mirrors one to one: the
per-caller rate limit (one budget over both, RESOURCE_EXHAUSTED with the RetryInfo of REST's
Retry-After), the audit entries of refused calls, and jobs addressed as ``team/name``."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, TypeVar

import grpc
import httpx
import pytest
from google.protobuf.message import Message
from google.rpc import error_details_pb2
from grpc_status import rpc_status
from pydantic import BaseModel, Field

from api.conftest import issue_token
from cronwheel.api.app import create_app
from cronwheel.auth.identity import Scope
from cronwheel.grpc_api import servicers
from cronwheel.limits import Limits
from cronwheel.store import JobQuery
from cronwheel.v1 import jobs_pb2, runs_pb2
from grpc_api.conftest import Env, Stubs, auth
from grpc_api.test_api import spec, violations

D = TypeVar("D", bound=Message)


def limit(env: Env, rate_per_s: float, rate_burst: int) -> None:
    """The operator's rate limit, where both APIs read it (the job service's limits)."""
    env.services.job_service.limits = dataclasses.replace(
        Limits(), rate_per_s=rate_per_s, rate_burst=rate_burst
    )


def detail(error: grpc.aio.AioRpcError, kind: type[D]) -> D:
    """The ``google.rpc`` detail of type ``kind`` that ``error`` carries."""
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None
    for packed in status.details:
        if packed.Is(kind.DESCRIPTOR):
            found = kind()
            packed.Unpack(found)
            return found
    raise AssertionError(f"no {kind.DESCRIPTOR.full_name} in {status}")


async def refusal(call: Any) -> grpc.aio.AioRpcError:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await call
    return refused.value


# -- the rate limit ------------------------------------------------------------------------------


async def test_the_call_past_the_burst_is_resource_exhausted_with_retry_info_and_writes_nothing(
    env: Env, stubs: Stubs
) -> None:
    limit(env, rate_per_s=0.5, rate_burst=3)
    token = auth(env.admin_token)
    for _ in range(3):
        await stubs.jobs.ListJobs(jobs_pb2.ListJobsRequest(), metadata=token)

    refused = await refusal(stubs.jobs.CreateJob(jobs_pb2.CreateJobRequest(job=spec()), metadata=token))
    assert refused.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert detail(refused, error_details_pb2.RetryInfo).retry_delay.seconds == 2  # a token at 0.5/s
    assert "0.5 a second (bursts of 3)" in (refused.details() or "")
    assert (await env.store.list_jobs(JobQuery())).items == []
    assert env.queue.published == []

    env.clock.advance(2)  # the bucket refills on the injected clock
    created = await stubs.jobs.CreateJob(jobs_pb2.CreateJobRequest(job=spec()), metadata=token)
    assert created.name == "nightly"


async def test_rest_and_grpc_calls_of_one_caller_share_one_budget(env: Env, stubs: Stubs) -> None:
    limit(env, rate_per_s=0.5, rate_burst=4)
    token = auth(env.admin_token)
    async with env.rest(env.admin_token) as http:
        for _ in range(2):
            await stubs.jobs.ListJobs(jobs_pb2.ListJobsRequest(), metadata=token)
            assert (await http.get("/v1/jobs")).status_code == 200
        over_rest = await http.get("/v1/jobs")
        over_grpc = await refusal(stubs.runs.ListRuns(runs_pb2.ListRunsRequest(), metadata=token))
        assert over_rest.status_code == 429
        assert over_grpc.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        retry_after = int(over_rest.headers["Retry-After"])
        assert detail(over_grpc, error_details_pb2.RetryInfo).retry_delay.seconds == retry_after == 2

        env.clock.advance(2)  # one token: gRPC takes it, and REST finds the bucket empty
        await stubs.jobs.ListJobs(jobs_pb2.ListJobsRequest(), metadata=token)
        assert (await http.get("/v1/jobs")).status_code == 429

        other = await issue_token(env.store, Scope.ADMIN, name="another-caller")  # a budget of its own
        await stubs.jobs.ListJobs(jobs_pb2.ListJobsRequest(), metadata=auth(other))


async def test_failed_authentications_over_grpc_spend_the_address_bucket_rest_checks(
    env: Env, stubs: Stubs
) -> None:
    limit(env, rate_per_s=0.5, rate_burst=3)
    await stubs.jobs.ListJobs(jobs_pb2.ListJobsRequest(), metadata=auth(env.admin_token))  # in use here
    unseen = await issue_token(env.store, Scope.ADMIN, name="unseen")
    for _ in range(3):
        failed = await refusal(stubs.jobs.ListJobs(jobs_pb2.ListJobsRequest(), metadata=auth("cw_nope_bad")))
        assert failed.code() == grpc.StatusCode.UNAUTHENTICATED

    # The address is now refused before authentication over both APIs, but for the tokens in use.
    fresh = await refusal(stubs.jobs.ListJobs(jobs_pb2.ListJobsRequest(), metadata=auth(unseen)))
    assert fresh.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "failed authentication" in (fresh.details() or "")
    assert detail(fresh, error_details_pb2.RetryInfo).retry_delay.seconds == 2
    await stubs.jobs.ListJobs(jobs_pb2.ListJobsRequest(), metadata=auth(env.admin_token))
    async with env.rest(unseen) as http:
        assert (await http.get("/v1/jobs")).status_code == 429
    async with env.rest(env.admin_token) as http:
        assert (await http.get("/v1/jobs")).status_code == 200


async def test_wrong_secrets_over_grpc_spend_the_token_s_bucket_rest_checks(env: Env, stubs: Stubs) -> None:
    """The token's bucket is spent over REST from other addresses; over gRPC, from the address
    it authenticated from, it is still served, until a wrong secret arrives from there too."""
    limit(env, rate_per_s=0.5, rate_burst=3)
    token = env.admin_token
    wrong = token[:-4] + ("AAAA" if not token.endswith("AAAA") else "BBBB")
    await stubs.jobs.ListJobs(jobs_pb2.ListJobsRequest(), metadata=auth(token))
    app = create_app(env.services)
    for n in range(3):
        transport = httpx.ASGITransport(app=app, client=(f"198.51.100.{n}", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as attacker:
            refused = await attacker.get("/v1/jobs", headers={"Authorization": f"Bearer {wrong}"})
            assert refused.status_code == 401
    await stubs.jobs.ListJobs(jobs_pb2.ListJobsRequest(), metadata=auth(token))
    failed = await refusal(stubs.jobs.ListJobs(jobs_pb2.ListJobsRequest(), metadata=auth(wrong)))
    assert failed.code() == grpc.StatusCode.UNAUTHENTICATED
    held = await refusal(stubs.jobs.ListJobs(jobs_pb2.ListJobsRequest(), metadata=auth(token)))
    assert held.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "failed authentications with this token" in (held.details() or "")


# -- the audit log of refusals -------------------------------------------------------------------

SAME = (
    "actor_kind",
    "actor_id",
    "actor_name",
    "client",
    "team",
    "target_kind",
    "outcome",
    "status",
    "detail",
)


async def refusal_entries(env: Env) -> dict[str, dict[str, Any]]:
    """The newest audit entry of each refusal action (read over REST, as an admin would)."""
    async with env.rest(env.admin_token) as http:
        response = await http.get("/v1/audit", params={"action": "auth", "limit": 1000})
    assert response.status_code == 200, response.text
    newest: dict[str, dict[str, Any]] = {}
    for entry in response.json()["items"]:  # newest first
        newest.setdefault(entry["action"], entry)
    return newest


async def test_refused_calls_leave_the_audit_entries_rest_leaves(env: Env, stubs: Stubs) -> None:
    job = await stubs.jobs.CreateJob(jobs_pb2.CreateJobRequest(job=spec()), metadata=auth(env.admin_token))
    prober = await issue_token(env.store, Scope.ADMIN, team="other", name="prober")
    reader = await issue_token(env.store, Scope.READ, team="data", name="reader")

    bad = await refusal(stubs.jobs.ListJobs(jobs_pb2.ListJobsRequest(), metadata=auth("cw_nope_bad")))
    wall = await refusal(stubs.jobs.GetJob(jobs_pb2.GetJobRequest(job_id=job.id), metadata=auth(prober)))
    missing = await refusal(
        stubs.jobs.GetJob(jobs_pb2.GetJobRequest(job_id="no-such-job"), metadata=auth(prober))
    )
    denied = await refusal(
        stubs.jobs.DeleteJob(jobs_pb2.DeleteJobRequest(job_id=job.id), metadata=auth(reader))
    )
    assert bad.code() == grpc.StatusCode.UNAUTHENTICATED
    assert wall.code() == missing.code() == grpc.StatusCode.NOT_FOUND
    assert denied.code() == grpc.StatusCode.PERMISSION_DENIED
    over_grpc = await refusal_entries(env)
    assert set(over_grpc) == {"auth.unauthenticated", "auth.hidden", "auth.forbidden"}  # no wall: no entry
    assert over_grpc["auth.unauthenticated"]["target_id"] == "gRPC /cronwheel.v1.JobService/ListJobs"
    assert over_grpc["auth.hidden"]["target_id"] == "gRPC /cronwheel.v1.JobService/GetJob"
    assert over_grpc["auth.forbidden"]["target_id"] == "gRPC /cronwheel.v1.JobService/DeleteJob"

    env.clock.advance(61)  # past the sampler's window: the same refusals over REST are recorded too
    async with env.rest("cw_nope_bad") as anonymous, env.rest(prober) as other, env.rest(reader) as read_only:
        assert (await anonymous.get("/v1/jobs")).status_code == 401
        assert (await other.get(f"/v1/jobs/{job.id}")).status_code == 404
        assert (await read_only.delete(f"/v1/jobs/{job.id}")).status_code == 403
    over_rest = await refusal_entries(env)
    assert over_rest["auth.hidden"]["target_id"] == f"GET /v1/jobs/{job.id}"
    for action, entry in over_rest.items():
        assert entry["id"] != over_grpc[action]["id"]
        assert {k: entry[k] for k in SAME} == {k: over_grpc[action][k] for k in SAME}, action
    assert over_grpc["auth.forbidden"]["team"] == "data"
    assert over_grpc["auth.hidden"]["actor_name"] == "prober"
    assert over_grpc["auth.unauthenticated"]["client"] == "127.0.0.1"


async def test_a_flood_of_refused_calls_is_coalesced_like_rest(env: Env, stubs: Stubs) -> None:
    for _ in range(3):
        await refusal(stubs.jobs.ListJobs(jobs_pb2.ListJobsRequest(), metadata=auth("cw_nope_bad")))
    async with env.rest("cw_nope_bad") as anonymous:  # the same address: the same kind of refusal
        assert (await anonymous.get("/v1/jobs")).status_code == 401
    env.clock.advance(61)
    await refusal(stubs.runs.ListRuns(runs_pb2.ListRunsRequest(), metadata=auth("cw_nope_bad")))
    async with env.rest(env.admin_token) as http:
        response = await http.get("/v1/audit", params={"action": "auth.unauthenticated"})
    entries = response.json()["items"]
    assert len(entries) == 2
    assert entries[0]["detail"].endswith("and 3 alike since the last one recorded")


# -- addressing a job as team/name ---------------------------------------------------------------


async def test_a_job_is_addressed_by_team_and_name_as_over_rest(env: Env, stubs: Stubs) -> None:
    token = auth(env.admin_token)
    job = await stubs.jobs.CreateJob(jobs_pb2.CreateJobRequest(job=spec()), metadata=token)
    assert env.services.secrets is not None
    await env.services.secrets.set("other", "hook-token", "s3cret")
    await stubs.jobs.CreateJob(jobs_pb2.CreateJobRequest(job=spec(team="other")), metadata=token)

    got = await stubs.jobs.GetJob(jobs_pb2.GetJobRequest(job_id="data/nightly"), metadata=token)
    assert (got.id, got.team) == (job.id, "data")  # not other/nightly, the same name in another team
    paused = await stubs.jobs.PauseJob(
        jobs_pb2.PauseJobRequest(job_id="data/nightly", note="maintenance"), metadata=token
    )
    assert (paused.id, paused.paused, paused.pause_note) == (job.id, True, "maintenance")
    resumed = await stubs.jobs.ResumeJob(jobs_pb2.ResumeJobRequest(job_id="data/nightly"), metadata=token)
    assert (resumed.id, resumed.paused) == (job.id, False)
    triggered = await stubs.jobs.TriggerJob(jobs_pb2.TriggerJobRequest(job_id="data/nightly"), metadata=token)
    assert triggered.run.job_id == job.id
    runs = await stubs.runs.ListJobRuns(runs_pb2.ListJobRunsRequest(job_id="data/nightly"), metadata=token)
    assert [run.id for run in runs.items] == [triggered.run.id]
    async with env.rest(env.admin_token) as http:  # what REST answers at the name's path
        over_rest = (await http.get("/v1/teams/data/jobs/nightly")).json()
    assert over_rest["id"] == got.id
    assert (
        over_rest["version"]
        == (await stubs.jobs.GetJob(jobs_pb2.GetJobRequest(job_id=job.id), metadata=token)).version
    )

    await stubs.jobs.DeleteJob(jobs_pb2.DeleteJobRequest(job_id="data/nightly"), metadata=token)
    gone = await refusal(stubs.jobs.GetJob(jobs_pb2.GetJobRequest(job_id="data/nightly"), metadata=token))
    assert gone.code() == grpc.StatusCode.NOT_FOUND  # a deleted job is reached by its id only
    kept = await stubs.runs.ListJobRuns(runs_pb2.ListJobRunsRequest(job_id=job.id), metadata=token)
    assert [run.id for run in kept.items] == [triggered.run.id]


async def test_another_teams_name_is_hidden_and_a_malformed_address_names_the_field(
    env: Env, stubs: Stubs
) -> None:
    await stubs.jobs.CreateJob(jobs_pb2.CreateJobRequest(job=spec()), metadata=auth(env.admin_token))
    prober = await issue_token(env.store, Scope.ADMIN, team="other", name="prober")
    hidden = await refusal(
        stubs.jobs.GetJob(jobs_pb2.GetJobRequest(job_id="data/nightly"), metadata=auth(prober))
    )
    missing = await refusal(
        stubs.jobs.GetJob(jobs_pb2.GetJobRequest(job_id="other/nightly"), metadata=auth(prober))
    )
    assert hidden.code() == missing.code() == grpc.StatusCode.NOT_FOUND
    assert hidden.details() == "team 'data' has no job named 'nightly'"  # as if it did not exist
    assert (await refusal_entries(env))["auth.hidden"]["target_id"] == "gRPC /cronwheel.v1.JobService/GetJob"

    for address in ("data/", "/nightly", "data/night/ly", "data/night ly"):
        bad = await refusal(
            stubs.jobs.PauseJob(jobs_pb2.PauseJobRequest(job_id=address), metadata=auth(env.admin_token))
        )
        assert bad.code() == grpc.StatusCode.INVALID_ARGUMENT, address
        assert set(violations(bad)) == {"job_id"}
    assert not (await env.store.find_job("data", "nightly")).paused  # type: ignore[union-attr]


# -- one definition of the list methods' query constraints ---------------------------------------

KEYWORDS = ("type", "minimum", "maximum", "minLength", "maxLength", "pattern", "minItems", "maxItems", "enum")
LISTS: tuple[tuple[type[BaseModel], str, frozenset[str]], ...] = (
    (servicers._JobListing, "/v1/jobs", frozenset()),
    (servicers._RunListing, "/v1/runs", frozenset()),
    (servicers._JobRunListing, "/v1/jobs/{job_id}/runs", frozenset({"job_id"})),  # ListJobRuns: a path
    (servicers._TokenListing, "/v1/tokens", frozenset()),
    (servicers._Listing, "/v1/teams/{team}/secrets", frozenset()),
)


def constraints(schema: dict[str, Any], defs: dict[str, Any]) -> dict[str, Any]:
    """What a JSON schema constrains (its keywords, those of its items, of what a $ref names, of
    an ``anyOf``'s non-null branches), with a default other than none: titles and descriptions
    left out."""
    if "$ref" in schema:
        schema = {
            **defs[schema["$ref"].rsplit("/", 1)[1]],
            **{k: v for k, v in schema.items() if k != "$ref"},
        }
    found = {key: schema[key] for key in (*KEYWORDS, "default") if key in schema}
    for branch in schema.get("anyOf", ()):
        if branch.get("type") != "null":
            found.update(constraints(branch, defs))
    if "items" in schema:
        found["items"] = constraints(schema["items"], defs)
    if found.get("default", 0) in (None, []):  # no filter, said either way
        del found["default"]
    return found


def rest_parameters(openapi: dict[str, Any], path: str) -> dict[str, dict[str, Any]]:
    defs = openapi["components"]["schemas"]
    parameters = openapi["paths"][path]["get"]["parameters"]
    return {p["name"]: constraints(p["schema"], defs) for p in parameters if p["in"] == "query"}


def grpc_fields(model: type[BaseModel]) -> dict[str, dict[str, Any]]:
    schema = model.model_json_schema()
    return {name: constraints(field, schema.get("$defs", {})) for name, field in schema["properties"].items()}


async def test_the_list_methods_take_the_query_constraints_rest_declares(env: Env) -> None:
    openapi = create_app(env.services).openapi()
    for model, path, in_path in LISTS:
        rest, grpc_side = rest_parameters(openapi, path), grpc_fields(model)
        assert set(grpc_side) - in_path == set(rest), path  # the same names
        for name in rest:
            assert grpc_side[name] == rest[name], (path, name)
    assert rest_parameters(openapi, "/v1/jobs")["limit"] == {
        "type": "integer", "minimum": 1, "maximum": 1000, "default": 100,
    }  # fmt: skip
    assert rest_parameters(openapi, "/v1/jobs")["label"]["maxItems"] == 64

    class Drifted(servicers._Listing):  # a copy that drifted is told apart
        limit: Annotated[int, Field(ge=1, le=500)] = 100

    assert grpc_fields(Drifted)["limit"] != rest_parameters(openapi, "/v1/runs")["limit"]


async def test_list_requests_out_of_bounds_are_refused_naming_the_field(env: Env, stubs: Stubs) -> None:
    token = auth(env.admin_token)
    for request, field in (
        (jobs_pb2.ListJobsRequest(limit=1001), "limit"),
        (jobs_pb2.ListJobsRequest(limit=0), "limit"),
        (jobs_pb2.ListJobsRequest(cursor="not a cursor!"), "cursor"),
        (jobs_pb2.ListJobsRequest(label=[f"k{n}=v" for n in range(65)]), "label"),
        (jobs_pb2.ListJobsRequest(label=["novalue"]), "label"),
    ):
        refused = await refusal(stubs.jobs.ListJobs(request, metadata=token))
        assert refused.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert set(violations(refused)) == {field}, request
    async with env.rest(env.admin_token) as http:  # REST refuses the same, naming the same field
        answer = await http.get("/v1/jobs", params={"label": [f"k{n}=v" for n in range(65)]})
    assert answer.status_code == 422
    assert {error["field"] for error in answer.json()["errors"]} == {"label"}
