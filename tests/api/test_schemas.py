"""One definition of a job's fields: the API's choices are the model's enums, JobPatch and JobOut
are derived from JobSpec, spec_fields follows it, and the OpenAPI document stays whole."""

from __future__ import annotations

import dataclasses
import enum
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any, get_args

import httpx
import pytest
from pydantic import ValidationError

from cronwheel.api.routes.output import OutputKept
from cronwheel.api.schemas.jobs import JobCreate, JobOut, JobPatch, JobSpec, spec_fields
from cronwheel.api.schemas.policies import MisfireSpec, RetrySpec
from cronwheel.auth.identity import Scope
from cronwheel.auth.tokens import TokenState
from cronwheel.model import (
    BackfillState,
    CalendarShift,
    KafkaSasl,
    MisfireMode,
    MqttQos,
    Outcome,
    Overlap,
    RetentionPolicy,
    RunKind,
    RunState,
    SkipReason,
    Target,
)
from cronwheel.notifications.rules import Condition
from cronwheel.schedule import DstFold, DstGap, FireKind
from cronwheel.schedule.calendar import WEEKDAYS

EVERY_FIELD: dict[str, Any] = {
    "team": "data",
    "name": "rollup",
    "schedule": "*/15 9-17 * * MON-FRI",
    "timezone": "America/New_York",
    "dst_gap": "skip",
    "dst_fold": "both",
    "target": {
        "type": "http",
        "url": "https://hooks.example.com/x",
        "method": "PUT",
        "headers": {"X-A": "1", "Authorization": {"secret": "rollup-token"}},
        "expected_status": [200, 202],
        "signing_secret": {"secret": "rollup-signing"},
    },
    "description": "rolls up",
    "payload": {"tables": ["a", "b"]},
    "timeout_s": 120.0,
    "retry": {
        "max_attempts": 5,
        "initial_delay_s": 2.0,
        "multiplier": 3.0,
        "max_delay_s": 60.0,
        "jitter": False,
    },
    "misfire": {"policy": "catch_up", "grace_s": 5.0, "max_catch_up": 3},
    "overlap": "forbid",
    "jitter_s": 120.0,
    "start_at": "2026-04-01T00:00:00Z",
    "end_at": "2026-12-31T23:59:59Z",
    "queue": "batch",
    "labels": {"tier": "gold"},
    "retention": {"keep_days": 30, "keep_runs": None},
    "delete_after_success": False,  # true: @at jobs only (tests/api/test_elapsed_jobs.py)
    "calendars": ["holidays", "closures"],
    "calendar_shift": "none",
}


def _enums(node: Any, path: str = "") -> Iterator[tuple[str, list[Any]]]:
    """Every ``enum`` of a JSON schema document, with where it is."""
    if isinstance(node, dict):
        if "enum" in node:
            yield path, node["enum"]
        for key, value in node.items():
            yield from _enums(value, f"{path}/{key}")
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _enums(value, f"{path}/{index}")


def _values(choices: Any) -> list[Any]:
    """An enum's values, or a Literal alias's."""
    if isinstance(choices, type) and issubclass(choices, enum.Enum):
        return [member.value for member in choices]
    return list(get_args(choices))


# The model's choices, and those the API alone defines (an HTTP verb; what resume does; where a
# job's notification rules come from; how much of an attempt's output is kept).
MODEL_CHOICES = [
    _values(c)
    for c in (
        Overlap,
        CalendarShift,
        MisfireMode,
        RunState,
        RunKind,
        SkipReason,
        BackfillState,
        Outcome,
        FireKind,
        DstGap,
        DstFold,
        Scope,
        TokenState,
        Condition,
        MqttQos,
        KafkaSasl,
    )
]
API_CHOICES = [
    ["GET", "POST", "PUT", "PATCH", "DELETE"],
    ["skip", "misfire"],
    ["job", "team", "none"],
    _values(OutputKept),
    list(WEEKDAYS),  # a calendar's closed weekdays (cronwheel.schedule.calendar)
]


async def test_every_choice_in_the_openapi_document_is_the_models(client: httpx.AsyncClient) -> None:
    spec = (await client.get("/openapi.json")).json()
    found = list(_enums(spec))
    assert found
    for path, choices in found:
        assert choices in MODEL_CHOICES + API_CHOICES, (path, choices)
    schemas = spec["components"]["schemas"]
    for enum_type in (Overlap, MisfireMode, RunState, RunKind, BackfillState, Outcome, FireKind):
        assert schemas[enum_type.__name__]["enum"] == _values(enum_type)
    create = schemas["JobCreate"]["properties"]
    assert create["overlap"]["$ref"] == "#/components/schemas/Overlap"
    assert [a.get("enum") for a in create["dst_gap"]["anyOf"]] == [list(get_args(DstGap)), None]
    assert [a.get("enum") for a in create["dst_fold"]["anyOf"]] == [list(get_args(DstFold)), None]
    run_states = spec["paths"]["/v1/runs"]["get"]["parameters"]
    (state,) = [p for p in run_states if p["name"] == "state"]
    assert state["schema"]["items"]["$ref"] == "#/components/schemas/RunState"


async def test_target_types_are_the_models(client: httpx.AsyncClient) -> None:
    """One word, ``type``, and the same tags as the model's target records."""
    spec = (await client.get("/openapi.json")).json()
    mapping = spec["components"]["schemas"]["JobCreate"]["properties"]["target"]["discriminator"]["mapping"]
    model_tags = {target.__dataclass_fields__["type"].default for target in get_args(Target)}
    assert (
        set(mapping)
        == model_tags
        == {"http", "command", "python", "grpc", "nats", "mqtt", "rabbitmq", "kafka"}
    )


def test_patch_has_exactly_the_spec_fields_with_the_same_constraints_and_docs() -> None:
    assert list(JobPatch.model_fields) == list(JobSpec.model_fields)
    spec = JobSpec.model_json_schema()
    patch = JobPatch.model_json_schema()
    assert "required" not in patch
    for name, field in spec["properties"].items():
        shown = dict(patch["properties"][name])
        if name in ("retry", "misfire"):  # merged field by field: a patch of the policy
            nested = spec["$defs"][field["$ref"].rsplit("/", 1)[1]]
            nested_patch = patch["$defs"][shown.pop("$ref").rsplit("/", 1)[1]]
            assert "required" not in nested_patch
            assert list(nested_patch["properties"]) == list(nested["properties"])
            for key, value in nested["properties"].items():
                assert nested_patch["properties"][key] == {k: v for k, v in value.items() if k != "default"}
            continue
        assert shown == {key: value for key, value in field.items() if key != "default"}, name
        assert JobPatch.model_fields[name].description == JobSpec.model_fields[name].description


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"team": "a b"}, "team"),
        ({"timeout_s": 0}, "timeout_s"),
        ({"timeout_s": "30"}, "timeout_s"),
        ({"labels": {"k": "v" * 201}}, "labels.k"),
        ({"retry": {"max_attempts": 0}}, "retry.max_attempts"),
        ({"misfire": {"policy": "sometimes"}}, "misfire.policy"),
        ({"overlap": "maybe"}, "overlap"),
        ({"target": {"type": "http"}}, "target.http.url"),
        ({"start_at": "tomorrow"}, "start_at"),
        ({"colour": "blue"}, "colour"),
    ],
)
def test_patch_refuses_what_the_spec_refuses(body: dict[str, Any], field: str) -> None:
    with pytest.raises(ValidationError) as refused:
        JobPatch.model_validate(body)
    assert [".".join(map(str, error["loc"])) for error in refused.value.errors()] == [field]


def test_patch_null_clears_only_what_the_spec_lets_be_null() -> None:
    nullable = {"dst_gap", "dst_fold", "payload", "start_at", "end_at", "retention"}
    for name in JobSpec.model_fields:
        if name in nullable:
            assert JobPatch.model_validate({name: None}).model_fields_set == {name}
            continue
        with pytest.raises(ValidationError, match="cannot be null"):
            JobPatch.model_validate({name: None})


def test_patch_of_a_policy_names_only_the_fields_given() -> None:
    """A patch may raise ``initial_delay_s`` above the default ``max_delay_s``: the rule is
    judged on the merged policy, not on the patch with defaults filled in."""
    patch = JobPatch.model_validate({"retry": {"initial_delay_s": 600}})
    assert patch.model_dump(exclude_unset=True) == {"retry": {"initial_delay_s": 600}}
    with pytest.raises(ValidationError):
        RetrySpec.model_validate({"initial_delay_s": 600})  # the whole policy still refuses it


def test_job_out_shares_the_spec_fields() -> None:
    for name, field in JobSpec.model_fields.items():
        shared = JobOut.model_fields[name]
        assert (shared.annotation, shared.metadata, shared.description) == (
            field.annotation,
            field.metadata,
            field.description,
        )


def test_spec_fields_are_the_spec_and_round_trip() -> None:
    spec = JobCreate.model_validate(EVERY_FIELD)
    fields = spec_fields(spec.to_record("j"))
    assert list(fields) == list(JobSpec.model_fields)
    assert fields == spec.model_dump(mode="json") == EVERY_FIELD
    record = spec.to_record("j")
    assert record.overlap is Overlap.FORBID
    assert record.misfire.mode is MisfireMode.CATCH_UP
    assert record.start_at == datetime(2026, 4, 1, tzinfo=UTC)
    assert MisfireSpec.model_validate({"policy": "run_once"}).to_record().mode is MisfireMode.RUN_ONCE
    assert dataclasses.asdict(record.retry) == EVERY_FIELD["retry"]


_TEMPLATE = re.compile(r"{([^}]+)}")


async def test_openapi_document_is_whole(client: httpx.AsyncClient) -> None:
    """Every reference resolves, every path variable is a declared path parameter, operation ids
    are unique: what a client generator needs."""
    spec = (await client.get("/openapi.json")).json()
    refs = [ref for _, ref in _refs(spec)]
    assert refs
    for ref in refs:
        node: Any = spec
        for part in ref.removeprefix("#/").split("/"):
            node = node[part]
        assert isinstance(node, dict), ref
    ids: list[str] = []
    for path, operations in spec["paths"].items():
        for method, operation in operations.items():
            declared = {p["name"] for p in operation.get("parameters", []) if p["in"] == "path"}
            assert declared == set(_TEMPLATE.findall(path)), (method, path)
            ids.append(operation["operationId"])
    assert len(ids) == len(set(ids))


def _refs(node: Any) -> Iterator[tuple[str, str]]:
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "$ref":
                yield key, value
            else:
                yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def test_a_stored_payload_is_not_measured_again_on_the_way_out() -> None:
    """A response costs no json.dumps of every payload (measured: a 60 KB payload made each
    JobOut 20x slower): the limit is checked when a payload is written."""
    record = dataclasses.replace(JobCreate.model_validate(EVERY_FIELD).to_record("j"), payload="x" * 70_000)
    assert JobOut.from_record(record, now=record.created_at or datetime.now(UTC)).payload == "x" * 70_000
    with pytest.raises(ValidationError, match="payload"):
        JobCreate.model_validate({**EVERY_FIELD, "payload": "x" * 70_000})


def test_retention_bounds_and_an_empty_policy() -> None:
    base = {key: EVERY_FIELD[key] for key in ("team", "name", "schedule", "target")}
    assert JobCreate.model_validate({**base, "retention": {}}).to_record().retention == RetentionPolicy()
    assert JobCreate.model_validate(base).to_record().retention is None  # the server's default
    for bad in ({"keep_days": 0}, {"keep_runs": -1}, {"keep_days": "3"}, {"keep_weeks": 1}):
        with pytest.raises(ValidationError):
            JobCreate.model_validate({**base, "retention": bad})
