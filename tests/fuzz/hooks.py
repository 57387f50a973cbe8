"""Schemathesis hooks of the fuzz run (loaded through ``SCHEMATHESIS_HOOKS``): one check, and
the fuzzer's own token kept alive.

The stateful phase follows links: ``GET /v1/tokens`` lists the fuzzer's own admin token, and
``DELETE /v1/tokens/{token_id}`` with that id revoked it, so every later request was answered 401
and fuzzed nothing. :func:`keep_own_token` points such a revocation at an id that does not exist
(the fuzzer's token id comes in ``CRONWHEEL_FUZZ_TOKEN_ID``); revoking other tokens is fuzzed.

``positive_data_acceptance`` says that a request valid by the OpenAPI document must not be
refused. Most of cronwheel's refusals are the document's own constraints (types, lengths,
patterns, enums), and for those the check stands as it is: a schema-valid request refused for
such a reason means the document is looser than the server. A few refusals no JSON Schema can
state: that a cron expression's fields are in range, that a zone exists in the zone database,
that the operator's policy allows a target, that a job has a slot left to fire, that a page
cursor is one this API returned, that one field is not below another, that no string anywhere
(free JSON included) holds U+0000 or a lone surrogate. The server names each of
them with its own ``code`` in the problem's ``errors``; :func:`accepted_beyond_the_schema`
accepts a 422 whose every entry is one of them, and fails like the original on anything else.
"""

from __future__ import annotations

import json
import os
from typing import Any

import schemathesis
from schemathesis.openapi.checks import RejectedPositiveData
from schemathesis.specs.openapi.checks import positive_data_acceptance

# Entry codes of refusals a schema cannot state (cronwheel.api.schemas.checks, cronwheel.api.routes.jobs,
# cronwheel.api.routes.backfills).
BEYOND_THE_SCHEMA = frozenset(
    {
        "invalid_schedule",  # the cron grammar, field ranges and the zone database
        "target_invalid",  # what the HTTP client itself refuses in a URL
        "target_refused",  # the operator's target policy (SSRF guard, commands, python allow-list)
        "plain_credential",  # the operator's policy: credentials only as secret references
        "queue_not_served",  # the queues the operator's workers serve
        "no_slot",  # a window with no fire time left, judged against the clock
        "not_one_time",  # delete_after_success on a schedule that is not @at: one field against another
        "invalid_cursor",  # a cursor is opaque: only the server knows which ones it made
        "in_the_past",  # a token's expiry, judged against the clock
        "secret_not_found",  # a reference to a team secret: only the store knows which exist
        "field_order",  # one field against another (end_at after start_at, max_delay_s >= initial)
        "range_order",  # a backfill's to after its from, a runs list's until after its since
        "in_future",  # a backfill's to, judged against the clock
        "confirm_required",  # a backfill of more slots than the limit: only the schedule counts them
        "too_many_slots",  # the same, beyond what even a confirmed backfill takes
        "payload_too_large",  # 64 KiB of compact JSON, measured after parsing
        # U+0000 or a lone surrogate in any string, keys of free JSON (a payload) included: what no
        # store can hold (cronwheel.api.schemas.storable), stated once in the document's description
        # rather than as a pattern on every string of every schema
        "unstorable_text",
        # calendars (cronwheel.schedule.calendar, cronwheel.jobs.service): only the installed holidays
        # data knows its countries and subdivisions, only the calendar knows which dates exist
        # (2027-02-30 matches the pattern), one entry against another (a range's from after its to,
        # one listed twice), only the store knows a team's calendars, only the schedule engine how
        # often a schedule fires, and a shift against the job's calendars
        "unknown_country",
        "unknown_subdivision",
        "invalid_calendar",
        "range_reversed",
        "duplicate",
        "calendar_not_found",
        "shift_needs_daily_schedule",
        "shift_without_calendars",
        "team_required",  # a preview's calendars without the team they belong to: one field against another
    }
)


def refused_beyond_the_schema(status: int, body: bytes) -> bool:
    """Whether a refusal is a 422 problem whose every entry names a reason beyond the schema."""
    if status != 422:
        return False
    try:
        problem: Any = json.loads(body)
    except ValueError:
        return False
    entries = problem.get("errors") if isinstance(problem, dict) else None
    return (
        isinstance(entries, list)
        and bool(entries)
        and all(isinstance(entry, dict) and entry.get("code") in BEYOND_THE_SCHEMA for entry in entries)
    )


@schemathesis.check
def accepted_beyond_the_schema(ctx: Any, response: Any, case: Any) -> bool | None:
    """``positive_data_acceptance``, except for refusals no schema can state (see the module)."""
    try:
        return positive_data_acceptance(ctx, response, case)
    except RejectedPositiveData:
        if refused_beyond_the_schema(response.status_code, response.content):
            return None
        raise


OWN_TOKEN_ID = "CRONWHEEL_FUZZ_TOKEN_ID"
"""The environment variable that names the fuzzer's own token id (``cw_<id>_<secret>``)."""


@schemathesis.hook
def before_call(ctx: Any, case: Any, kwargs: dict[str, Any]) -> None:
    """Keep the fuzzer's own token: see the module."""
    own = os.environ.get(OWN_TOKEN_ID)
    parameters = case.path_parameters or {}
    if own and case.method.upper() == "DELETE" and parameters.get("token_id") == own:
        parameters["token_id"] = "000000000000"
