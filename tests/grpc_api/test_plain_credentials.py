"""The gRPC API shares the REST API's rule on plain credentials (api/operations.py): refused when
a job is written (INVALID_ARGUMENT naming the field), masked in GetJob and ListJobs for a caller
without the ``write`` scope, shown to a writer."""

from __future__ import annotations

from dataclasses import replace

import grpc
import pytest
from google.protobuf import struct_pb2

from api.conftest import issue_token
from cronwheel.auth.identity import Scope
from cronwheel.v1 import jobs_pb2, targets_pb2
from grpc_api.conftest import Env, Stubs, auth

SECRET = "s3cr3t-v4lue"


def spec() -> jobs_pb2.JobSpec:
    headers = {"Authorization": struct_pb2.Value(string_value=SECRET)}
    target = targets_pb2.Target(
        http=targets_pb2.HttpTarget(url="https://hooks.example.com/x", headers=headers)
    )
    return jobs_pb2.JobSpec(team="data", name="nightly", schedule="0 3 * * *", target=target)


async def test_refused_when_written(env: Env, stubs: Stubs) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stubs.jobs.CreateJob(jobs_pb2.CreateJobRequest(job=spec()), metadata=auth(env.admin_token))
    assert caught.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "target.headers.Authorization holds a credential in clear" in (caught.value.details() or "")
    assert SECRET not in (caught.value.details() or "")


async def test_masked_for_a_reader_shown_to_a_writer(env: Env, stubs: Stubs) -> None:
    service = env.services.job_service
    service.policy = replace(service.policy, allow_plain_credentials=True)
    created = await stubs.jobs.CreateJob(
        jobs_pb2.CreateJobRequest(job=spec()), metadata=auth(env.admin_token)
    )
    service.policy = replace(service.policy, allow_plain_credentials=False)
    reader = auth(await issue_token(env.store, Scope.READ, team="data", name="reader"))
    got = await stubs.jobs.GetJob(jobs_pb2.GetJobRequest(job_id=created.id), metadata=reader)
    listed = await stubs.jobs.ListJobs(jobs_pb2.ListJobsRequest(), metadata=reader)
    for job in (got, listed.items[0]):
        assert job.target.http.headers["Authorization"].string_value == "***"
        assert SECRET not in str(job)
    writer = auth(await issue_token(env.store, Scope.READ, Scope.WRITE, team="data", name="writer"))
    shown = await stubs.jobs.GetJob(jobs_pb2.GetJobRequest(job_id=created.id), metadata=writer)
    assert shown.target.http.headers["Authorization"].string_value == SECRET
