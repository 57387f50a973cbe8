"""Messages of ``cronwheel.v1`` to and from the REST API's pydantic models: the only translation.

A request message becomes a dict (``google.protobuf.json_format`` with the proto field names,
which are the REST JSON names), that dict is validated as JSON by the very model REST validates
its body with, and the service layer is called with it (:mod:`cronwheel.api.operations`). An
answer goes back the same way: the REST response model's JSON dict parsed into the message
(unknown fields refused, so a field REST answers that the proto lacks fails loudly).

Two shapes differ, on purpose: a target is ``{"type": "http", ...}`` in JSON and a ``oneof``
of one message per type in proto (``{"http": {...}}``), and a proto3 field left unset is
omitted (the REST default applies), where JSON would say ``null``. Instants are RFC 3339
strings on both sides; free JSON (payloads, the cluster status) is ``google.protobuf.Value`` /
``Struct``.
"""

from __future__ import annotations

import json
from typing import Any, TypeVar

from google.protobuf import json_format
from google.protobuf.message import Message
from pydantic import BaseModel
from pydantic_core import to_jsonable_python

M = TypeVar("M", bound=BaseModel)
P = TypeVar("P", bound=Message)


def to_dict(message: Message) -> dict[str, Any]:
    """``message`` as JSON-ready values under its proto field names (unset fields omitted)."""
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def validated(model: type[M], data: dict[str, Any]) -> M:
    """``data`` validated as a JSON request body of ``model`` (as REST validates one)."""
    return model.model_validate_json(json.dumps(data))


def target_json(target: dict[str, Any]) -> dict[str, Any]:
    """A proto target (``{"http": {...}}``) as REST's (``{"type": "http", ...}``)."""
    if len(target) != 1:
        return target  # no kind set: the model names target.type as missing
    ((kind, fields),) = target.items()
    return {"type": kind, **fields}


def target_proto(target: dict[str, Any]) -> dict[str, Any]:
    """REST's target (``{"type": "http", ...}``) as a proto one (``{"http": {...}}``)."""
    fields = dict(target)
    return {fields.pop("type"): fields}


def spec_json(spec: dict[str, Any]) -> dict[str, Any]:
    """A proto ``JobSpec`` dict as REST's job body."""
    if "target" in spec:
        spec = {**spec, "target": target_json(spec["target"])}
    return spec


def jsonable(model: BaseModel | dict[str, Any]) -> dict[str, Any]:
    data = model.model_dump(mode="json") if isinstance(model, BaseModel) else to_jsonable_python(model)
    assert isinstance(data, dict)
    return data


def message(model: BaseModel | dict[str, Any], into: P) -> P:
    """The answer ``model`` (a REST response model, or JSON-ready dict) as the message ``into``."""
    data = _targets_to_proto(jsonable(model))
    json_format.ParseDict(data, into)
    return into


def _targets_to_proto(data: Any) -> Any:
    """Every job's ``target`` in ``data`` (a job, a page of jobs) in its proto shape."""
    if isinstance(data, list):
        return [_targets_to_proto(item) for item in data]
    if not isinstance(data, dict):
        return data
    out = {key: _targets_to_proto(value) for key, value in data.items() if key != "target"}
    if "target" in data:
        target = data["target"]
        out["target"] = target_proto(target) if isinstance(target, dict) and "type" in target else target
    return out
