"""A job's definition as ``apply`` files hold it, and which fields of the API's job are the
server's own.

Both are derived from the API's schema: :class:`~cronwheel.api.schemas.jobs.JobFields` is what a
client defines, and the other fields of :class:`~cronwheel.api.schemas.jobs.JobOut` (id, version,
paused, next_run_at, last_run ...) are the server's, read-only to ``apply``. A field added to the
schema is exported, compared and applied without a change here. Also here: which credentials of
a definition hold the mask a reader without the write scope is shown, which must never be applied.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from cronwheel.redaction import HIDDEN

if TYPE_CHECKING:
    from cronwheel.api.schemas.jobs import JobSpec

MASKED_TEXT = (
    f"{HIDDEN!r} is how the server shows a credential to a reader without the write scope, not its "
    "value; write the value, or a {secret: NAME} reference"
)


@functools.cache
def definition_fields() -> tuple[str, ...]:
    """The fields a client defines, in the schema's order (the order an export writes)."""
    # imported here, not at the top: pydantic costs every other command ~0.2 s of start-up
    from cronwheel.api.schemas.jobs import JobFields  # noqa: PLC0415

    return tuple(JobFields.model_fields)


@functools.cache
def server_fields() -> frozenset[str]:
    """The fields of a job the API returns that the server owns."""
    from cronwheel.api.schemas.jobs import JobOut  # noqa: PLC0415

    return frozenset(JobOut.model_fields) - set(definition_fields())


def definition(job: Mapping[str, Any]) -> dict[str, Any]:
    """The definition of ``job`` as the API returned it: every client-defined field, defaults
    included, in the schema's order; labels sorted by key (a label set has no order of its own,
    so two equal jobs export alike however their labels were written)."""
    spec = {name: job[name] for name in definition_fields() if name in job}
    if isinstance(spec.get("labels"), dict):
        spec["labels"] = dict(sorted(spec["labels"].items()))
    return spec


def masked_fields(job: JobSpec) -> list[str]:
    """The credentials of ``job`` that hold the server's mask (``***``) instead of a value, as
    a job read without the write scope does; applied, the mask would replace the real value."""
    from cronwheel.targets.kinds import plain_credentials  # noqa: PLC0415

    return [
        where
        for where, value in plain_credentials(job.to_record().target)
        if value == HIDDEN or (where == "target.url" and HIDDEN in value)
    ]


def masked_in(job: Mapping[str, Any]) -> list[str]:
    """:func:`masked_fields` of a job the API returned (validated only when its target shows the
    mask at all: an export reads every job)."""
    if HIDDEN not in json.dumps(job.get("target")):
        return []
    from pydantic import ValidationError  # noqa: PLC0415

    from cronwheel.api.schemas.jobs import JobUpdate  # noqa: PLC0415

    try:
        return masked_fields(JobUpdate.model_validate(definition(job)))
    except ValidationError:  # not this CLI's schema: apply will say what is wrong with it
        return []
