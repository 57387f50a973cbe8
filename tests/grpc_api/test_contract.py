"""The committed ``cronwheel.v1`` code is what scripts/protos makes from proto/, and every proto
message has exactly the fields of the REST model it mirrors (a field added on one side fails here
until it is added on the other)."""

from __future__ import annotations

import os
import subprocess
import sys
import typing
from pathlib import Path

import pytest
from google.protobuf.descriptor import Descriptor
from pydantic import BaseModel

from cronwheel.api.routes import calendars, secrets, tokens
from cronwheel.api.schemas import jobs as jobs_schemas
from cronwheel.api.schemas import policies as policies_schemas
from cronwheel.api.schemas import preview as preview_schemas
from cronwheel.api.schemas import runs as runs_schemas
from cronwheel.api.schemas import targets as targets_schemas
from cronwheel.v1 import (
    calendars_pb2,
    jobs_pb2,
    runs_pb2,
    schedules_pb2,
    secrets_pb2,
    targets_pb2,
    tokens_pb2,
)

ROOT = Path(__file__).resolve().parents[2]


def test_the_committed_code_is_what_the_protos_generate(tmp_path: Path) -> None:
    env = {**os.environ, "PYTHON": sys.executable}  # the locked grpcio-tools and mypy-protobuf
    subprocess.run([str(ROOT / "scripts" / "protos"), str(tmp_path)], check=True, env=env)
    committed = ROOT / "src" / "cronwheel" / "v1"
    made = tmp_path / "cronwheel" / "v1"
    names = sorted(path.name for path in made.iterdir() if "_pb2" in path.name)
    assert names == sorted(path.name for path in committed.iterdir() if "_pb2" in path.name)
    stale = [name for name in names if (made / name).read_bytes() != (committed / name).read_bytes()]
    assert not stale, f"run scripts/protos: {stale} differ from proto/cronwheel/v1"


MIRRORS: list[tuple[Descriptor, type[BaseModel]]] = [
    (jobs_pb2.JobSpec.DESCRIPTOR, jobs_schemas.JobFields),
    (jobs_pb2.Job.DESCRIPTOR, jobs_schemas.JobOut),
    (jobs_pb2.JobValidation.DESCRIPTOR, jobs_schemas.JobValidation),
    (jobs_pb2.JobPage.DESCRIPTOR, jobs_schemas.JobPage),
    (jobs_pb2.RetrySpec.DESCRIPTOR, policies_schemas.RetrySpec),
    (jobs_pb2.MisfireSpec.DESCRIPTOR, policies_schemas.MisfireSpec),
    (jobs_pb2.RetentionSpec.DESCRIPTOR, policies_schemas.RetentionSpec),
    (jobs_pb2.LastRun.DESCRIPTOR, jobs_schemas.LastRunOut),
    (jobs_pb2.RecentRun.DESCRIPTOR, jobs_schemas.RecentRunOut),
    (runs_pb2.Run.DESCRIPTOR, runs_schemas.RunOut),
    (runs_pb2.RunDetail.DESCRIPTOR, runs_schemas.RunDetailOut),
    (runs_pb2.Attempt.DESCRIPTOR, runs_schemas.AttemptOut),
    (runs_pb2.RunEvent.DESCRIPTOR, runs_schemas.RunEventOut),
    (runs_pb2.RunPage.DESCRIPTOR, runs_schemas.RunPage),
    (schedules_pb2.PreviewScheduleRequest.DESCRIPTOR, preview_schemas.PreviewIn),
    (schedules_pb2.SchedulePreview.DESCRIPTOR, preview_schemas.PreviewOut),
    (schedules_pb2.Fire.DESCRIPTOR, preview_schemas.FireOut),
    (targets_pb2.SecretRef.DESCRIPTOR, targets_schemas.SecretRefSpec),
    (tokens_pb2.CreateTokenRequest.DESCRIPTOR, tokens.TokenCreate),
    (tokens_pb2.Token.DESCRIPTOR, tokens.TokenOut),
    (tokens_pb2.CreatedToken.DESCRIPTOR, tokens.TokenCreated),
    (tokens_pb2.TokenPage.DESCRIPTOR, tokens.TokenPage),
    (secrets_pb2.Secret.DESCRIPTOR, secrets.SecretOut),
    (secrets_pb2.SecretPage.DESCRIPTOR, secrets.SecretPage),
    (secrets_pb2.ReencryptResult.DESCRIPTOR, secrets.ReencryptOut),
    (secrets_pb2.ReencryptFailure.DESCRIPTOR, secrets.ReencryptFailure),
    (calendars_pb2.Calendar.DESCRIPTOR, calendars.CalendarOut),
    (calendars_pb2.CalendarPage.DESCRIPTOR, calendars.CalendarPage),
    (calendars_pb2.CalendarSpec.DESCRIPTOR, calendars.CalendarBody),
    (calendars_pb2.HolidaysSpec.DESCRIPTOR, calendars.HolidaysSpec),
]


@pytest.mark.parametrize(
    ("message", "model"), MIRRORS, ids=lambda x: getattr(x, "name", getattr(x, "__name__", ""))
)
def test_each_message_has_its_rest_models_fields(message: Descriptor, model: type[BaseModel]) -> None:
    assert sorted(message.fields_by_name) == sorted(model.model_fields)


def _rest_targets() -> dict[str, type[BaseModel]]:
    """The REST target models by their ``type`` tag (the members of the TargetSpec union)."""
    union = typing.get_args(targets_schemas.TargetSpec)[0]
    found = {}
    for model in typing.get_args(union):
        (tag,) = typing.get_args(model.model_fields["type"].annotation)
        found[tag] = model
    return found


def test_every_rest_target_kind_is_a_proto_target_with_the_same_fields() -> None:
    """REST's kinds are exactly the proto kinds, each with the same fields."""
    kinds = targets_pb2.Target.DESCRIPTOR.oneofs_by_name["kind"].fields
    proto = {field.name: field.message_type for field in kinds if field.message_type is not None}
    rest = _rest_targets()
    assert {"http", "command", "python"} <= rest.keys()
    assert rest.keys() == proto.keys()
    for tag, model in rest.items():
        assert sorted(proto[tag].fields_by_name) == sorted(set(model.model_fields) - {"type"}), tag
