"""The building blocks of the API's bodies: strict input and output models, RFC 3339 instants
with an offset, integral numbers, and the documented annotations every schema uses."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    GetJsonSchemaHandler,
    Strict,
    StringConstraints,
)
from pydantic.json_schema import JsonSchemaValue
from pydantic_core import CoreSchema

from cronwheel.model import (
    CalendarShift,
    MisfireMode,
    Outcome,
    Overlap,
    RunKind,
    RunState,
    SkipReason,
)
from cronwheel.schedule import FireKind

# -- building blocks ---------------------------------------------------------------------------


class Documented:
    """JSON Schema keywords that the OpenAPI document states about a value which code checks,
    not the schema: the schedule parser, the zone database, :mod:`cronwheel.targets.checks`. The
    document then says what the server enforces while the server keeps its own precise messages
    (a cron field and column, "target.argv[1] contains a NUL byte"), and a stored value written
    before a check existed is still read back. Each keyword must never refuse what that code
    accepts: tests/api/test_openapi.py proves it for each of them."""

    def __init__(self, **keywords: Any) -> None:
        self.keywords = keywords

    def __get_pydantic_json_schema__(
        self, core_schema: CoreSchema, handler: GetJsonSchemaHandler
    ) -> JsonSchemaValue:
        schema = handler(core_schema)
        schema.update(self.keywords)
        return schema


# What the schedule parser can read: a macro, an interval (@every 90m [from INSTANT]), one instant
# (@at INSTANT), or five or six fields of these characters separated by whitespace (str.split's,
# which counts \x1c-\x1f too); it alone says what is in range.
CRON_FIELD = r"[0-9A-Za-z*?,/#()-]+"
_WS = r"[\s\x1c-\x1f]"
_ELAPSED = rf"@[Ee][Vv][Ee][Rr][Yy]{_WS}+\S+({_WS}+[Ff][Rr][Oo][Mm]{_WS}+\S+)?|@[Aa][Tt]{_WS}+\S+"
CRON_PATTERN = rf"^{_WS}*(@\S+|{_ELAPSED}|{CRON_FIELD}({_WS}+{CRON_FIELD}){{4,5}}){_WS}*$"
ZONE_PATTERN = r"^[A-Za-z0-9._+/-]{1,64}$"  # the characters of IANA zone names
# An absolute http(s) URL without control characters (leading spaces are stripped by the parser).
URL_PATTERN = r"^ *[Hh][Tt][Tt][Pp][Ss]?://[^\x00-\x1f\x7f]+$"
C_STRING = r"^[^\x00]*$"  # what execve takes: no NUL byte
NO_OTHER_KEYS = Documented(additionalProperties=False)  # a map whose keys all match its key pattern


def integral(value: object) -> object:
    """JSON has one kind of number: ``3.0`` is the integer 3 to JSON Schema (and so to the
    document), so it is one here too; ``3.5`` and ``true`` stay refused."""
    if type(value) is float and value.is_integer():
        return int(value)
    return value


Integer = Annotated[int, BeforeValidator(integral)]

NAME_PATTERN = r"^[A-Za-z0-9._-]{1,100}$"
Name = Annotated[str, StringConstraints(pattern=NAME_PATTERN)]
LabelKey = Annotated[str, StringConstraints(pattern=r"^[A-Za-z0-9._/-]{1,100}$")]
LabelValue = Annotated[str, StringConstraints(max_length=200, pattern=r"^[^\x00-\x1f\x7f]*$")]
HeaderName = Annotated[str, StringConstraints(pattern=r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,200}$")]
HeaderValue = Annotated[
    str,
    StringConstraints(max_length=8192, pattern=r"^[^\r\n\x00]*$"),
    Documented(pattern=r"^[^\x00-\x08\x0a-\x1f\x7f]*$"),  # what aiohttp sends (cronwheel.targets.checks)
]
EnvName = Annotated[str, StringConstraints(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,199}$")]
ScheduleText = Annotated[
    str, StringConstraints(min_length=1, max_length=1000), Documented(pattern=CRON_PATTERN)
]
ZoneName = Annotated[str, StringConstraints(min_length=1, max_length=64), Documented(pattern=ZONE_PATTERN)]
CString = Annotated[str, StringConstraints(max_length=4096), Documented(pattern=C_STRING)]

# The model's enums, taken by value (``"forbid"``) from JSON and from Python dicts alike (a strict
# model would otherwise want the enum member itself from Python, as ``cronwheel apply`` passes).
OverlapChoice = Annotated[Overlap, Strict(False)]
CalendarShiftChoice = Annotated[CalendarShift, Strict(False)]
MisfireChoice = Annotated[MisfireMode, Strict(False)]
RunStateName = Annotated[RunState, Strict(False)]
RunKindName = Annotated[RunKind, Strict(False)]
OutcomeName = Annotated[Outcome, Strict(False)]
SkipReasonName = Annotated[SkipReason, Strict(False)]
FireKindName = Annotated[FireKind, Strict(False)]

_RFC3339 = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d{1,9})?([Zz]|[+-]\d{2}:\d{2})?$",
)


def _rfc3339_text(value: object) -> object:
    """Instants must come as RFC 3339 text (no Unix numbers, no date alone); the offset check is
    left to ``AwareDatetime`` so that a naive time gets its own clear message."""
    if isinstance(value, datetime):
        return value
    if not isinstance(value, str) or not _RFC3339.match(value):
        raise ValueError("must be an RFC 3339 date-time with an offset, such as 2026-03-01T09:00:00Z")
    return value


def _as_utc(value: datetime) -> datetime:
    try:
        return value.astimezone(UTC)
    except OverflowError:  # 9999-12-31T23:00:00-02:00 is in no year Python has
        raise ValueError("must be between 0001-01-01T00:00:00Z and 9999-12-31T23:59:59Z") from None


Instant = Annotated[
    AwareDatetime,
    BeforeValidator(_rfc3339_text),
    AfterValidator(_as_utc),
    Strict(False),
]


class StrictModel(BaseModel):
    """Request bodies; also the job's parts in responses, where every field is always present."""

    model_config = ConfigDict(
        extra="forbid", strict=True, allow_inf_nan=False, json_schema_serialization_defaults_required=True
    )


class OutModel(BaseModel):
    model_config = ConfigDict(extra="forbid")
