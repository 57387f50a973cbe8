"""Calendars over gRPC (``cronwheel.v1.CalendarService``) and jobs that list them: the same
decisions as REST (create, get, list, replace, delete; a bad part is INVALID_ARGUMENT naming its
field; a listed calendar is not deleted), and the job's calendar fields round-trip."""

from __future__ import annotations

import grpc
import pytest

from cronwheel.v1 import calendars_pb2, calendars_pb2_grpc, jobs_pb2

from .conftest import Env, Stubs, auth
from .test_api import spec, violations


async def test_create_get_list_replace_and_delete(env: Env, stubs: Stubs, channel: grpc.aio.Channel) -> None:
    token = auth(env.admin_token)
    calendars = calendars_pb2_grpc.CalendarServiceStub(channel)
    closed = calendars_pb2.CalendarSpec(
        weekdays=["sat", "sun"],
        ranges=[calendars_pb2.DateRange(**{"from": "2027-12-24", "to": "2027-12-26"})],
        holidays=calendars_pb2.HolidaysSpec(country="DE", subdivision="BY"),
    )
    created = await calendars.CreateCalendar(
        calendars_pb2.CreateCalendarRequest(team="data", name="closed", calendar=closed), metadata=token
    )
    assert (list(created.weekdays), created.holidays.subdivision, created.version) == (
        ["sat", "sun"],
        "BY",
        1,
    )
    assert getattr(created.ranges[0], "from") == "2027-12-24"
    got = await calendars.GetCalendar(
        calendars_pb2.GetCalendarRequest(team="data", name="closed"), metadata=token
    )
    assert got == created
    listed = await calendars.ListCalendars(calendars_pb2.ListCalendarsRequest(team="data"), metadata=token)
    assert [c.name for c in listed.items] == ["closed"]

    job = await stubs.jobs.CreateJob(
        jobs_pb2.CreateJobRequest(job=spec(calendars=["closed"], calendar_shift="next")), metadata=token
    )
    assert (list(job.calendars), job.calendar_shift) == (["closed"], "next")
    replaced = await calendars.ReplaceCalendar(
        calendars_pb2.ReplaceCalendarRequest(
            team="data", name="closed", calendar=calendars_pb2.CalendarSpec(weekdays=["sun"])
        ),
        metadata=token,
    )
    assert (list(replaced.weekdays), replaced.HasField("holidays"), replaced.version) == (["sun"], False, 2)
    reread = await stubs.jobs.GetJob(jobs_pb2.GetJobRequest(job_id=job.id), metadata=token)
    assert reread.version == job.version + 1  # the job listing it follows

    with pytest.raises(grpc.aio.AioRpcError) as in_use:
        await calendars.DeleteCalendar(
            calendars_pb2.DeleteCalendarRequest(team="data", name="closed"), metadata=token
        )
    assert in_use.value.code() == grpc.StatusCode.ALREADY_EXISTS  # REST's 409
    assert "nightly" in (in_use.value.details() or "")
    await stubs.jobs.DeleteJob(jobs_pb2.DeleteJobRequest(job_id=job.id), metadata=token)
    await calendars.DeleteCalendar(
        calendars_pb2.DeleteCalendarRequest(team="data", name="closed"), metadata=token
    )
    with pytest.raises(grpc.aio.AioRpcError) as gone:
        await calendars.GetCalendar(
            calendars_pb2.GetCalendarRequest(team="data", name="closed"), metadata=token
        )
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND


async def test_a_bad_calendar_is_invalid_argument_naming_its_field(
    env: Env, channel: grpc.aio.Channel
) -> None:
    token = auth(env.admin_token)
    calendars = calendars_pb2_grpc.CalendarServiceStub(channel)
    reversed_range = calendars_pb2.CalendarSpec(
        ranges=[calendars_pb2.DateRange(**{"from": "2027-02-03", "to": "2027-02-01"})]
    )
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await calendars.CreateCalendar(
            calendars_pb2.CreateCalendarRequest(team="data", name="bad", calendar=reversed_range),
            metadata=token,
        )
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "ranges[0]" in violations(refused.value)
    listed = await calendars.ListCalendars(calendars_pb2.ListCalendarsRequest(team="data"), metadata=token)
    assert list(listed.items) == []
