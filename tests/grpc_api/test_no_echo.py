"""The gRPC API, like REST, names what it refuses and never repeats the refused value: not in
the status message, not in a field violation."""

from __future__ import annotations

import grpc
import pytest
from grpc_status import rpc_status

from cronwheel.v1 import jobs_pb2, runs_pb2

from .conftest import Env, Stubs, auth
from .test_api import spec

MARK = "zq7mark"


def _said(error: grpc.aio.AioRpcError) -> str:
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    return f"{error.details()} {status}"


@pytest.mark.parametrize(
    "changes",
    [
        {"schedule": f"0 3 * * {MARK}"},
        {"schedule": f"{MARK} 3 * * *"},
        {"timezone": f"Europe/{MARK}"},
        {"name": f"{MARK} !"},
    ],
    ids=["schedule-day", "schedule-minute", "timezone", "name"],
)
async def test_a_refused_job_field_is_named_not_repeated(
    env: Env, stubs: Stubs, changes: dict[str, str]
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stubs.jobs.CreateJob(
            jobs_pb2.CreateJobRequest(job=spec(**changes)), metadata=auth(env.admin_token)
        )
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert MARK not in _said(refused.value)


@pytest.mark.parametrize(
    "request_",
    [
        jobs_pb2.ListJobsRequest(label=[MARK]),
        jobs_pb2.ListJobsRequest(cursor=MARK),
    ],
    ids=["label", "cursor"],
)
async def test_a_refused_list_filter_is_named_not_repeated(
    env: Env, stubs: Stubs, request_: jobs_pb2.ListJobsRequest
) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stubs.jobs.ListJobs(request_, metadata=auth(env.admin_token))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert MARK not in _said(refused.value)


async def test_a_refused_run_cursor_is_named_not_repeated(env: Env, stubs: Stubs) -> None:
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stubs.runs.ListRuns(runs_pb2.ListRunsRequest(cursor=MARK), metadata=auth(env.admin_token))
    assert MARK not in _said(refused.value)
