"""The gRPC API end to end with the generated stubs alone: what a client in another language
does with the proto files (create, list with a filter and a cursor, patch with a field mask,
pause, resume, trigger twice with one idempotency key, runs, delete), and its refusals: no token,
a bad token, another team's job, invalid input (INVALID_ARGUMENT with BadRequest field
violations), a version that moved (FAILED_PRECONDITION)."""

from __future__ import annotations

import grpc
import pytest
from google.protobuf import field_mask_pb2, struct_pb2
from google.rpc import error_details_pb2
from grpc_status import rpc_status

from api.conftest import issue_token
from cronwheel.auth.identity import Scope
from cronwheel.v1 import jobs_pb2, runs_pb2, schedules_pb2, schedules_pb2_grpc, secrets_pb2, targets_pb2
from grpc_api.conftest import Env, Stubs, auth


def spec(name: str = "nightly", team: str = "data", **fields: object) -> jobs_pb2.JobSpec:
    headers = {
        "X-Token": struct_pb2.Value(
            struct_value=struct_pb2.Struct(fields={"secret": struct_pb2.Value(string_value="hook-token")})
        )
    }
    target = targets_pb2.Target(
        http=targets_pb2.HttpTarget(url="https://hooks.example.com/nightly", headers=headers)
    )
    given: dict[str, object] = {
        "schedule": "0 3 * * *", "timezone": "Europe/Berlin", "labels": {"tier": "gold"}, **fields
    }  # fmt: skip
    return jobs_pb2.JobSpec(team=team, name=name, target=target, **given)  # type: ignore[arg-type]


def violations(error: grpc.aio.AioRpcError) -> dict[str, str]:
    """The BadRequest field violations of ``error``: field -> description."""
    status = rpc_status.from_call(error)  # type: ignore[arg-type]
    assert status is not None
    found: dict[str, str] = {}
    for detail in status.details:
        if detail.Is(error_details_pb2.BadRequest.DESCRIPTOR):
            bad = error_details_pb2.BadRequest()
            detail.Unpack(bad)
            found.update({v.field: v.description for v in bad.field_violations})
    return found


async def test_a_job_lifecycle_with_the_generated_stubs(env: Env, stubs: Stubs) -> None:
    token = auth(env.admin_token)
    created = await stubs.jobs.CreateJob(jobs_pb2.CreateJobRequest(job=spec()), metadata=token)
    assert created.id
    assert created.version == 1
    assert created.team == "data"
    assert created.target.WhichOneof("kind") == "http"
    assert created.target.http.headers["X-Token"].struct_value.fields["secret"].string_value == "hook-token"
    assert created.timeout_s == 60.0
    assert created.retry.max_attempts == 1
    assert created.next_run_at == "2026-03-03T02:00:00Z"
    for name in ("second", "third"):
        await stubs.jobs.CreateJob(jobs_pb2.CreateJobRequest(job=spec(name)), metadata=token)
    await stubs.jobs.CreateJob(
        jobs_pb2.CreateJobRequest(job=spec("other", labels={"tier": "bronze"})), metadata=token
    )

    first = await stubs.jobs.ListJobs(jobs_pb2.ListJobsRequest(label=["tier=gold"], limit=2), metadata=token)
    assert [job.name for job in first.items] == ["nightly", "second"]
    assert first.HasField("next_cursor")
    rest = await stubs.jobs.ListJobs(
        jobs_pb2.ListJobsRequest(label=["tier=gold"], limit=2, cursor=first.next_cursor), metadata=token
    )
    assert [job.name for job in rest.items] == ["third"]
    assert not rest.HasField("next_cursor")

    patched = await stubs.jobs.PatchJob(
        jobs_pb2.PatchJobRequest(
            job_id=created.id,
            job=jobs_pb2.JobSpec(schedule="30 4 * * *", retry=jobs_pb2.RetrySpec(max_attempts=3)),
            update_mask=field_mask_pb2.FieldMask(paths=["schedule", "retry.max_attempts"]),
        ),
        metadata=token,
    )
    assert patched.schedule == "30 4 * * *"
    assert patched.retry.max_attempts == 3
    assert patched.retry.max_delay_s == 300.0  # merged field by field, as REST's PATCH
    assert patched.labels == {"tier": "gold"}
    assert patched.version == 2

    paused = await stubs.jobs.PauseJob(
        jobs_pb2.PauseJobRequest(job_id=created.id, note="maintenance", expected_version=2), metadata=token
    )
    assert paused.paused
    assert paused.pause_note == "maintenance"
    resumed = await stubs.jobs.ResumeJob(jobs_pb2.ResumeJobRequest(job_id=created.id), metadata=token)
    assert not resumed.paused

    trigger = jobs_pb2.TriggerJobRequest(
        job_id=created.id, idempotency_key="deploy-42", payload=struct_pb2.Value(string_value="now")
    )
    once = await stubs.jobs.TriggerJob(trigger, metadata=token)
    again = await stubs.jobs.TriggerJob(trigger, metadata=token)
    assert once.created
    assert not again.created
    assert once.run.id == again.run.id
    assert once.run.idempotency_key == "deploy-42"
    assert once.run.payload.string_value == "now"
    assert once.run.kind == "manual"
    assert len(env.queue.published) == 1  # one trigger queued, not two

    runs = await stubs.runs.ListJobRuns(runs_pb2.ListJobRunsRequest(job_id=created.id), metadata=token)
    assert [run.id for run in runs.items] == [once.run.id]
    detail = await stubs.runs.GetRun(runs_pb2.GetRunRequest(run_id=once.run.id), metadata=token)
    assert detail.job_name == "nightly"
    assert [event.state for event in detail.events][:1] == ["PENDING"]
    every = await stubs.runs.ListRuns(runs_pb2.ListRunsRequest(state=["PENDING"]), metadata=token)
    assert once.run.id in [run.id for run in every.items]

    await stubs.jobs.DeleteJob(jobs_pb2.DeleteJobRequest(job_id=created.id), metadata=token)
    with pytest.raises(grpc.aio.AioRpcError) as gone:
        await stubs.jobs.GetJob(jobs_pb2.GetJobRequest(job_id=created.id), metadata=token)
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND


async def test_no_token_and_a_bad_token_are_unauthenticated(env: Env, stubs: Stubs) -> None:
    for metadata in ((), auth("cw_nope_nope"), (("authorization", "Basic abc"),)):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stubs.jobs.ListJobs(jobs_pb2.ListJobsRequest(), metadata=metadata)
        assert refused.value.code() == grpc.StatusCode.UNAUTHENTICATED


async def test_two_authorization_entries_are_invalid_whichever_comes_first(env: Env, stubs: Stubs) -> None:
    """The first of two was the credential: a valid one first and anything after it was served."""
    valid, invalid = ("authorization", f"Bearer {env.admin_token}"), ("authorization", "Bearer cw_nope_nope")
    for metadata in ((valid, invalid), (invalid, valid), (valid, valid)):
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stubs.jobs.ListJobs(jobs_pb2.ListJobsRequest(), metadata=metadata)
        assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert "one authorization" in (refused.value.details() or "")


async def test_another_teams_job_does_not_exist_and_a_missing_scope_is_denied(env: Env, stubs: Stubs) -> None:
    job = await stubs.jobs.CreateJob(jobs_pb2.CreateJobRequest(job=spec()), metadata=auth(env.admin_token))
    other = await issue_token(env.store, Scope.ADMIN, team="web")
    reader = await issue_token(env.store, Scope.READ, team="data")
    with pytest.raises(grpc.aio.AioRpcError) as hidden:
        await stubs.jobs.GetJob(jobs_pb2.GetJobRequest(job_id=job.id), metadata=auth(other))
    assert hidden.value.code() == grpc.StatusCode.NOT_FOUND  # as REST's 404: the wall hides it
    listed = await stubs.jobs.ListJobs(jobs_pb2.ListJobsRequest(), metadata=auth(other))
    assert list(listed.items) == []
    with pytest.raises(grpc.aio.AioRpcError) as denied:
        await stubs.jobs.PauseJob(jobs_pb2.PauseJobRequest(job_id=job.id), metadata=auth(reader))
    assert denied.value.code() == grpc.StatusCode.PERMISSION_DENIED
    with pytest.raises(grpc.aio.AioRpcError) as elsewhere:
        await stubs.jobs.CreateJob(
            jobs_pb2.CreateJobRequest(job=spec("x", team="web")), metadata=auth(reader)
        )
    assert elsewhere.value.code() == grpc.StatusCode.PERMISSION_DENIED


async def test_invalid_input_names_each_field_and_writes_nothing(env: Env, stubs: Stubs) -> None:
    bad = spec(schedule="61 * * * *", timeout_s=-1.0)
    bad.target.http.url = "http://10.0.0.1/hook"  # a private address: refused by the target policy
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stubs.jobs.CreateJob(jobs_pb2.CreateJobRequest(job=bad), metadata=auth(env.admin_token))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    fields = violations(refused.value)
    assert {"schedule", "timeout_s", "target.url"} <= fields.keys(), fields
    listed = await stubs.jobs.ListJobs(jobs_pb2.ListJobsRequest(), metadata=auth(env.admin_token))
    assert list(listed.items) == []

    with pytest.raises(grpc.aio.AioRpcError) as missing:
        await stubs.jobs.CreateJob(
            jobs_pb2.CreateJobRequest(job=jobs_pb2.JobSpec(team="data")), metadata=auth(env.admin_token)
        )
    assert {"name", "schedule", "target"} <= violations(missing.value).keys()

    with pytest.raises(grpc.aio.AioRpcError) as cursor:
        await stubs.jobs.ListJobs(
            jobs_pb2.ListJobsRequest(cursor="bm90LWEtY3Vyc29y"), metadata=auth(env.admin_token)
        )
    assert cursor.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "cursor" in violations(cursor.value)


async def test_interval_and_one_time_jobs_over_grpc(env: Env, stubs: Stubs) -> None:
    token = auth(env.admin_token)  # the clock is 2026-03-02T12:00Z
    every = await stubs.jobs.CreateJob(
        jobs_pb2.CreateJobRequest(job=spec("every", schedule="@every 7h")), metadata=token
    )
    assert every.next_run_at == "2026-03-02T16:00:00Z"  # the next whole multiple of 7 h since the epoch
    assert every.schedule_description == "every 7 hours of elapsed time"
    once = await stubs.jobs.CreateJob(
        jobs_pb2.CreateJobRequest(job=spec("once", schedule="@at 2026-03-03T09:30:00+01:00")), metadata=token
    )
    assert once.next_run_at == "2026-03-03T08:30:00Z"
    assert once.schedule_description == "once, at 2026-03-03 09:30:00 CET"
    with pytest.raises(grpc.aio.AioRpcError) as past:
        await stubs.jobs.CreateJob(
            jobs_pb2.CreateJobRequest(job=spec("past", schedule="@at 2026-03-02T11:00:00Z")), metadata=token
        )
    assert past.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "has passed" in violations(past.value)["schedule"]


async def test_delete_after_success_round_trips_on_a_one_time_job_only(env: Env, stubs: Stubs) -> None:
    token = auth(env.admin_token)
    once = spec("once", schedule="@at 2026-03-03T09:30:00Z", delete_after_success=True)
    created = await stubs.jobs.CreateJob(jobs_pb2.CreateJobRequest(job=once), metadata=token)
    assert created.delete_after_success is True
    got = await stubs.jobs.GetJob(jobs_pb2.GetJobRequest(job_id=created.id), metadata=token)
    assert got.delete_after_success is True
    mask = field_mask_pb2.FieldMask(paths=["delete_after_success"])
    unset = jobs_pb2.JobSpec(delete_after_success=False)  # optional: a false that is given
    cleared = jobs_pb2.PatchJobRequest(job_id=created.id, job=unset, update_mask=mask)
    assert (await stubs.jobs.PatchJob(cleared, metadata=token)).delete_after_success is False
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stubs.jobs.CreateJob(
            jobs_pb2.CreateJobRequest(job=spec("cron", delete_after_success=True)), metadata=token
        )
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "for one-time jobs only" in violations(refused.value)["delete_after_success"]


async def test_a_patch_mask_naming_no_field_is_refused(env: Env, stubs: Stubs) -> None:
    job = await stubs.jobs.CreateJob(jobs_pb2.CreateJobRequest(job=spec()), metadata=auth(env.admin_token))
    request = jobs_pb2.PatchJobRequest(
        job_id=job.id, job=jobs_pb2.JobSpec(), update_mask=field_mask_pb2.FieldMask(paths=["target.url"])
    )
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stubs.jobs.PatchJob(request, metadata=auth(env.admin_token))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "update_mask" in violations(refused.value)


async def test_a_version_that_moved_fails_the_precondition(env: Env, stubs: Stubs) -> None:
    token = auth(env.admin_token)
    job = await stubs.jobs.CreateJob(jobs_pb2.CreateJobRequest(job=spec()), metadata=token)
    await stubs.jobs.PauseJob(jobs_pb2.PauseJobRequest(job_id=job.id), metadata=token)  # version 2
    with pytest.raises(grpc.aio.AioRpcError) as moved:
        await stubs.jobs.ReplaceJob(
            jobs_pb2.ReplaceJobRequest(job_id=job.id, job=spec(), expected_version=1), metadata=token
        )
    assert moved.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    with pytest.raises(grpc.aio.AioRpcError) as taken:
        await stubs.jobs.CreateJob(jobs_pb2.CreateJobRequest(job=spec()), metadata=token)
    assert taken.value.code() == grpc.StatusCode.ALREADY_EXISTS


async def test_schedule_preview_and_secrets(env: Env, stubs: Stubs, channel: grpc.aio.Channel) -> None:
    token = auth(env.admin_token)
    preview = await schedules_pb2_grpc.ScheduleServiceStub(channel).PreviewSchedule(
        schedules_pb2.PreviewScheduleRequest(
            expression="0 9 * * MON-FRI", count=2, after="2026-03-02T12:00:00Z"
        ),
        metadata=token,
    )
    assert [preview.fires[i].utc for i in range(2)] == ["2026-03-03T09:00:00Z", "2026-03-04T09:00:00Z"]
    set_ = await stubs.secrets.SetSecret(
        secrets_pb2.SetSecretRequest(team="data", name="db-password", value="pa55word"), metadata=token
    )
    assert set_.created
    assert set_.secret.key_id == "k1"
    listed = await stubs.secrets.ListSecrets(secrets_pb2.ListSecretsRequest(team="data"), metadata=token)
    assert [s.name for s in listed.items] == ["db-password", "hook-token"]
    assert "pa55word" not in str(listed)
    assert "pa55word" not in str(set_)
    with pytest.raises(grpc.aio.AioRpcError) as bad_name:
        await stubs.secrets.SetSecret(
            secrets_pb2.SetSecretRequest(team="data", name="no/slash", value="x"), metadata=token
        )
    assert bad_name.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "name" in violations(bad_name.value)


async def test_a_backfill_with_its_dry_run_progress_and_refusals(env: Env, stubs: Stubs) -> None:
    token = auth(env.admin_token)
    created = await stubs.jobs.CreateJob(jobs_pb2.CreateJobRequest(job=spec()), metadata=token)
    start, end = "2026-02-25T00:00:00Z", "2026-03-01T00:00:00+01:00"
    dry_run = jobs_pb2.BackfillJobRequest(job_id="data/nightly", start=start, end=end, dry_run=True)
    plan = await stubs.jobs.BackfillJob(dry_run, metadata=token)
    assert plan.WhichOneof("result") == "plan"
    assert list(plan.plan.create) == [f"2026-02-{day}T02:00:00Z" for day in (25, 26, 27, 28)]
    assert (plan.plan.total, list(plan.plan.existing), plan.plan.confirm_required) == (4, [], False)
    listed = await stubs.jobs.ListBackfills(jobs_pb2.ListBackfillsRequest(job_id=created.id), metadata=token)
    assert list(listed.items) == []

    accepted = await stubs.jobs.BackfillJob(
        jobs_pb2.BackfillJobRequest(job_id="data/nightly", start=start, end=end), metadata=token
    )
    assert accepted.WhichOneof("result") == "backfill"
    backfill = accepted.backfill
    assert (backfill.state, backfill.total, backfill.remaining, backfill.next_slot) == (
        "running",
        4,
        4,
        "2026-02-25T02:00:00Z",
    )
    assert (backfill.start, backfill.end) == ("2026-02-25T00:00:00Z", "2026-02-28T23:00:00Z")
    listed = await stubs.jobs.ListBackfills(jobs_pb2.ListBackfillsRequest(job_id=created.id), metadata=token)
    assert [item.id for item in listed.items] == [backfill.id]
    one = jobs_pb2.GetBackfillRequest(job_id="data/nightly", backfill_id=backfill.id)
    assert await stubs.jobs.GetBackfill(one, metadata=token) == backfill

    backwards = jobs_pb2.BackfillJobRequest(job_id=created.id, start=end, end=start)
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stubs.jobs.BackfillJob(backwards, metadata=token)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "must be after from" in violations(refused.value)["to"]
    with pytest.raises(grpc.aio.AioRpcError) as missing:
        await stubs.jobs.BackfillJob(jobs_pb2.BackfillJobRequest(job_id=created.id), metadata=token)
    assert {"from", "to"} <= violations(missing.value).keys()
    listed = await stubs.jobs.ListBackfills(jobs_pb2.ListBackfillsRequest(job_id=created.id), metadata=token)
    assert len(listed.items) == 1


async def test_a_jitter_window_over_grpc(env: Env, stubs: Stubs, channel: grpc.aio.Channel) -> None:
    token = auth(env.admin_token)
    job = await stubs.jobs.CreateJob(
        jobs_pb2.CreateJobRequest(job=spec("hourly", schedule="0 * * * *", jitter_s=90.5)), metadata=token
    )
    assert job.jitter_s == 90.5
    assert job.next_run_at == "2026-03-02T13:00:00Z"
    assert job.next_fire_at > job.next_run_at
    assert (await stubs.jobs.GetJob(jobs_pb2.GetJobRequest(job_id=job.id), metadata=token)).jitter_s == 90.5
    with pytest.raises(grpc.aio.AioRpcError) as wide:
        await stubs.jobs.CreateJob(
            jobs_pb2.CreateJobRequest(job=spec("wide", schedule="0 * * * *", jitter_s=3600.0)), metadata=token
        )
    assert wide.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "shortest gap between two slots" in violations(wide.value)["jitter_s"]
    listed = await stubs.jobs.ListJobs(jobs_pb2.ListJobsRequest(), metadata=token)
    assert [item.name for item in listed.items] == ["hourly"]  # nothing written
    preview = await schedules_pb2_grpc.ScheduleServiceStub(channel).PreviewSchedule(
        schedules_pb2.PreviewScheduleRequest(
            expression="0 * * * *", count=1, after="2026-03-02T12:00:00Z", seed=job.id, jitter_s=90.5
        ),
        metadata=token,
    )
    assert preview.fires[0].fires_at == job.next_fire_at


async def test_a_running_backfill_is_cancelled_once(env: Env, stubs: Stubs) -> None:
    token = auth(env.admin_token)
    created = await stubs.jobs.CreateJob(jobs_pb2.CreateJobRequest(job=spec()), metadata=token)
    start, end = "2026-02-25T00:00:00Z", "2026-03-01T00:00:00Z"
    accepted = await stubs.jobs.BackfillJob(
        jobs_pb2.BackfillJobRequest(job_id=created.id, start=start, end=end), metadata=token
    )
    request = jobs_pb2.CancelBackfillRequest(job_id="data/nightly", backfill_id=accepted.backfill.id)
    cancelled = await stubs.jobs.CancelBackfill(request, metadata=token)
    assert (cancelled.state, cancelled.created, cancelled.remaining) == ("cancelled", 0, 4)
    assert not cancelled.HasField("next_slot")
    with pytest.raises(grpc.aio.AioRpcError) as again:
        await stubs.jobs.CancelBackfill(request, metadata=token)
    assert again.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "is cancelled, not running" in (again.value.details() or "")
    with pytest.raises(grpc.aio.AioRpcError) as unknown:
        await stubs.jobs.CancelBackfill(
            jobs_pb2.CancelBackfillRequest(job_id=created.id, backfill_id="nope"), metadata=token
        )
    assert unknown.value.code() == grpc.StatusCode.NOT_FOUND
