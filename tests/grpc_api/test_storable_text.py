"""The gRPC API refuses text no store can hold (U+0000) as REST does: INVALID_ARGUMENT with a
BadRequest violation naming the field as REST names it, nothing written, no INTERNAL."""

from __future__ import annotations

import grpc
import pytest

from cronwheel.grpc_api.calls import rest_path
from cronwheel.v1 import jobs_pb2

from .conftest import Env, Stubs, auth
from .test_api import spec, violations

NUL = "a\x00b"


async def test_a_job_with_nul_is_invalid_argument_naming_the_field(env: Env, stubs: Stubs) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stubs.jobs.CreateJob(
            jobs_pb2.CreateJobRequest(job=spec(description=NUL)), metadata=auth(env.admin_token)
        )
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert list(violations(refused.value)) == ["description"]
    assert NUL not in (refused.value.details() or "")
    listed = await stubs.jobs.ListJobs(jobs_pb2.ListJobsRequest(), metadata=auth(env.admin_token))
    assert list(listed.items) == []


async def test_a_pause_note_and_a_list_filter_with_nul_are_refused(env: Env, stubs: Stubs) -> None:
    token = auth(env.admin_token)
    job = await stubs.jobs.CreateJob(jobs_pb2.CreateJobRequest(job=spec()), metadata=token)
    with pytest.raises(grpc.aio.AioRpcError) as note:
        await stubs.jobs.PauseJob(jobs_pb2.PauseJobRequest(job_id=job.id, note=NUL), metadata=token)
    assert note.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert list(violations(note.value)) == ["note"]
    assert not (await stubs.jobs.GetJob(jobs_pb2.GetJobRequest(job_id=job.id), metadata=token)).paused
    with pytest.raises(grpc.aio.AioRpcError) as name:
        await stubs.jobs.ListJobs(jobs_pb2.ListJobsRequest(name=NUL), metadata=token)
    assert list(violations(name.value)) == ["name"]


async def test_without_a_token_the_call_is_unauthenticated_first(env: Env, stubs: Stubs) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stubs.jobs.ListJobs(jobs_pb2.ListJobsRequest(name=NUL))
    assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED


def test_fields_are_named_as_rest_names_them() -> None:
    assert rest_path(("job", "target", "http", "headers", "X-A")) == ("target", "headers", "X-A")
    assert rest_path(("job", "description")) == ("description",)
    assert rest_path(("note",)) == ("note",)


async def test_bytes_that_are_not_a_message_are_invalid_argument(env: Env) -> None:
    """A string field of bad UTF-8 (a lone surrogate's bytes): the client's fault, not UNKNOWN."""
    raw = jobs_pb2.ListJobsRequest(name="abc").SerializeToString().replace(b"abc", b"a\xed\xa0")
    async with env.channel() as channel:
        call = channel.unary_unary(
            "/cronwheel.v1.JobService/ListJobs",
            request_serializer=lambda data: data,
            response_deserializer=lambda data: data,
        )
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call(raw, metadata=auth(env.admin_token))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert refused.value.details() == "the request is not a valid message: String field had bad UTF-8"
