"""``PatchJob``'s field mask as REST's PATCH body (:class:`~cronwheel.api.schemas.jobs.JobPatch`).

Each path of ``update_mask`` names a field of ``JobSpec`` to change: its value in the request's
``job`` goes into the body, and a path whose field is unset there sends ``null`` (which clears a
nullable field, and is refused, naming it, for the others, as REST refuses a ``null``). ``retry``
and ``misfire`` also take paths of their own fields (``retry.max_attempts``), merged field by
field into the stored policy as REST merges them; every other field is replaced whole. An empty
mask changes the fields set in ``job``. A path that names no field is refused (INVALID_ARGUMENT
naming ``update_mask``).
"""

from __future__ import annotations

from typing import Any

from google.protobuf.field_mask_pb2 import FieldMask

from cronwheel.api.problems import ProblemError, field_error
from cronwheel.api.schemas.jobs import JobFields
from cronwheel.api.schemas.policies import MisfireSpec, RetrySpec
from cronwheel.grpc_api.convert import spec_json, to_dict
from cronwheel.v1 import jobs_pb2

_MERGED = {"retry": RetrySpec.model_fields, "misfire": MisfireSpec.model_fields}


def patch_body(job: jobs_pb2.JobSpec, mask: FieldMask) -> dict[str, Any]:
    """The JSON body of the PATCH that ``job`` and ``mask`` describe."""
    given = spec_json(to_dict(job))
    if not mask.paths:
        return given
    body: dict[str, Any] = {}
    for path in mask.paths:
        field, _, inner = path.partition(".")
        if field not in JobFields.model_fields or (inner and inner not in _MERGED.get(field, {})):
            raise _unknown(path)
        if not inner:
            body[field] = given.get(field)
            continue
        merged = body.setdefault(field, {})
        if isinstance(merged, dict):  # else the whole policy is named too: it wins
            merged[inner] = given.get(field, {}).get(inner)
    return body


def _unknown(path: str) -> ProblemError:
    why = "names no field of JobSpec (nested paths: retry.* and misfire.* only)"
    return ProblemError(
        422, "validation", "Invalid request", f"update_mask: {path!r} {why}",
        errors=[field_error("update_mask", f"{path!r} {why}", "body", code="unknown_field")],
    )  # fmt: skip
