"""``/v1/events``: a server-sent-event stream of what changes among the jobs, runs and cluster a
caller may read (:mod:`cronwheel.api.events`), so that a page re-reads what it shows when it
changed instead of polling. The dashboard reaches it through its session bridge."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query

from cronwheel.api import operations
from cronwheel.api.callers.auth import CallerDep
from cronwheel.api.events.hub import TooManyStreamsError
from cronwheel.api.events.stream import MEDIA_TYPE, EventStream
from cronwheel.api.events.topics import TOPICS_HELP, TOPICS_PATTERN, TopicsError, parse_topics
from cronwheel.api.openapi import PROBLEM_DOC
from cronwheel.api.problems import ProblemError, field_error
from cronwheel.api.routes.common import Services, problems_doc
from cronwheel.clock import monotonic_of

router = APIRouter()

MAX_TOPICS_LENGTH = 4096
TopicsQuery = Annotated[
    str, Query(description=TOPICS_HELP, max_length=MAX_TOPICS_LENGTH, pattern=TOPICS_PATTERN)
]
STREAM_DOC: dict[int | str, dict[str, Any]] = {
    200: {
        "description": (
            "An endless `text/event-stream`: `event: job` (data `{id, team, version}` or `{id, team, "
            "deleted: true}`), `event: run` (`{id, job_id, team, state}`), `event: cluster` (`{}`: "
            "re-read GET /v1/cluster) and `event: reload` (`{}`: changes may have been missed, re-read "
            "everything), a `: heartbeat` comment after 15 s of silence; it ends after 5 minutes "
            "and the client reconnects"
        ),
        "content": {MEDIA_TYPE: {"schema": {"type": "string"}}},
    },
    **problems_doc(401, 403, 404, 422),
    429: {
        "description": (
            "Too many requests (--rate-limit), or too many open streams: of this server "
            "(--max-streams) or of this caller (--max-streams-per-caller)"
        ),
        **PROBLEM_DOC,
    },
}


@router.get("/events", status_code=200, tags=["events"], response_class=EventStream, responses=STREAM_DOC)
async def follow(
    services: Services,
    caller: CallerDep,
    topics: Annotated[
        str, Query(description=TOPICS_HELP, max_length=MAX_TOPICS_LENGTH, pattern=TOPICS_PATTERN)
    ],
) -> EventStream:
    """Follow changes of the jobs and runs of the token's teams, and of the cluster: each event
    says what changed, enough to re-read it. Every topic is checked as the read of what it
    follows; a stream hears only of its caller's teams."""
    try:
        parsed = parse_topics(topics)
    except TopicsError as error:
        raise ProblemError(
            422, "validation", "Invalid request", f"topics: {error}",
            errors=[field_error("topics", str(error), "query", code="invalid_topics")],
        ) from None  # fmt: skip
    await operations.check_follow(services, caller, parsed)
    try:
        subscription = services.events.open(caller.id, caller.teams, parsed)
    except TooManyStreamsError as error:
        raise ProblemError(429, "too-many-streams", "Too many event streams", str(error)) from None
    return EventStream(services.events, subscription, monotonic_of(services.clock))
