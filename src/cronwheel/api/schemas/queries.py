"""The query parameters of the list endpoints, defined once for REST and gRPC.

Each is a type that carries its constraints (bounds, pattern, count of values). REST declares
its query parameters with them (``Annotated[PageLimit, Query()]``: FastAPI validates, and the
OpenAPI document states, the constraints the type carries); the gRPC API validates the fields of
its list requests with pydantic models of the same types (:mod:`cronwheel.grpc_api.servicers`).
tests/grpc_api/test_parity.py fails when the two disagree on any of them.
"""

from __future__ import annotations

from typing import Annotated

from annotated_types import Interval, Len
from pydantic import StringConstraints

from cronwheel.api.operations import MAX_LABELS, Include
from cronwheel.api.schemas.base import Documented, RunStateName, SkipReasonName
from cronwheel.model import RunState, SkipReason

DEFAULT_LIMIT = 100
PageLimit = Annotated[int, Interval(ge=1, le=1000)]
"""Items of one page (``limit``)."""

CURSOR_PATTERN = r"^[A-Za-z0-9_-]+={0,2}$"
CursorText = Annotated[str, StringConstraints(max_length=1000, pattern=CURSOR_PATTERN)]
"""What list pages return in ``next_cursor``: base64url (checked here; which ones it made, by
the store)."""

Short = Annotated[str, StringConstraints(max_length=100)]
"""A filter on a team, a job's name or a job id."""

LabelFilter = Annotated[str, Documented(pattern=r"^[^=]+="), StringConstraints(max_length=301)]
"""``key=value`` (a key of 100, a value of 200); the pattern is checked, naming ``label``, by
:func:`cronwheel.api.operations.label_pairs`."""

LabelFilters = Annotated[list[LabelFilter], Len(max_length=MAX_LABELS)]
States = Annotated[list[RunStateName], Len(max_length=len(RunState))]
Reasons = Annotated[list[SkipReasonName], Len(max_length=len(SkipReason))]
"""Why a run was skipped (the run's ``reason``): misfire, overlap, paused, calendar."""
Includes = Annotated[list[Include], Len(max_length=1)]
