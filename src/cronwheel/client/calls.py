"""Every endpoint of the ``/v1`` API, defined once: its route (:data:`ROUTES`) and a function per
endpoint that turns typed arguments into a :class:`Call` (the request to send and how to read the
answer). :class:`~cronwheel.client.Client` and :class:`~cronwheel.client.AsyncClient` only send
calls, so both have the same methods with the same signatures.

A job is named as the CLI names it: by its id, or as ``TEAM/NAME``, which goes to the API's
by-name address ``/v1/teams/{team}/jobs/{name}`` (a deleted job is reached by its id only).
``tests/client/test_routes.py`` holds :data:`ROUTES` equal to the app's routes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Generic, Literal, TypeVar, cast
from urllib.parse import quote

from cronwheel.client.errors import ConfigurationError
from cronwheel.client.types import (
    AuditEntry,
    Backfill,
    BackfillPlan,
    Calendar,
    Health,
    Job,
    JobValidation,
    NewToken,
    Page,
    Preview,
    Ready,
    Reencryption,
    Run,
    RunDetail,
    RunOutput,
    Secret,
    SecretSet,
    Token,
    Triggered,
)

T = TypeVar("T")

JOB = "{job}"  # a job route: registered by id and by team and name
BY_ID = "/v1/jobs/{job_id}"
BY_NAME = "/v1/teams/{team}/jobs/{name}"


@dataclass(frozen=True, slots=True)
class Route:
    method: str
    path: str  # as the app declares it; JOB + suffix for both addresses of a job route

    def paths(self) -> tuple[str, ...]:
        """The app's path(s) of this route."""
        if self.path.startswith(JOB):
            suffix = self.path.removeprefix(JOB)
            return (BY_ID + suffix, BY_NAME + suffix)
        return (self.path,)


ROUTES: Mapping[str, Route] = MappingProxyType(
    {
        "create_job": Route("POST", "/v1/jobs"),
        "validate_job": Route("POST", "/v1/jobs:validate"),
        "validate_job_edit": Route("POST", JOB + "/validate"),
        "list_jobs": Route("GET", "/v1/jobs"),
        "get_job": Route("GET", JOB),
        "replace_job": Route("PUT", JOB),
        "update_job": Route("PATCH", JOB),
        "delete_job": Route("DELETE", JOB),
        "pause_job": Route("POST", JOB + "/pause"),
        "resume_job": Route("POST", JOB + "/resume"),
        "trigger_job": Route("POST", JOB + "/trigger"),
        "backfill_job": Route("POST", JOB + "/backfills"),
        "job_backfills": Route("GET", JOB + "/backfills"),
        "get_backfill": Route("GET", JOB + "/backfills/{backfill_id}"),
        "cancel_backfill": Route("POST", JOB + "/backfills/{backfill_id}/cancel"),
        "list_job_runs": Route("GET", JOB + "/runs"),
        "list_runs": Route("GET", "/v1/runs"),
        "get_run": Route("GET", "/v1/runs/{run_id}"),
        "get_run_output": Route("GET", "/v1/runs/{run_id}/output"),
        "preview_schedule": Route("POST", "/v1/schedules/preview"),
        "cluster_status": Route("GET", "/v1/cluster"),
        "upcoming_fires": Route("GET", "/v1/schedules/upcoming"),
        "create_token": Route("POST", "/v1/tokens"),
        "list_tokens": Route("GET", "/v1/tokens"),
        "get_token": Route("GET", "/v1/tokens/{token_id}"),
        "revoke_token": Route("DELETE", "/v1/tokens/{token_id}"),
        "list_secrets": Route("GET", "/v1/teams/{team}/secrets"),
        "get_secret": Route("GET", "/v1/teams/{team}/secrets/{name}"),
        "set_secret": Route("PUT", "/v1/teams/{team}/secrets/{name}"),
        "delete_secret": Route("DELETE", "/v1/teams/{team}/secrets/{name}"),
        "reencrypt_secrets": Route("POST", "/v1/secrets/reencrypt"),
        "list_calendars": Route("GET", "/v1/teams/{team}/calendars"),
        "get_calendar": Route("GET", "/v1/teams/{team}/calendars/{name}"),
        "create_calendar": Route("POST", "/v1/teams/{team}/calendars"),
        "replace_calendar": Route("PUT", "/v1/teams/{team}/calendars/{name}"),
        "delete_calendar": Route("DELETE", "/v1/teams/{team}/calendars/{name}"),
        "list_audit": Route("GET", "/v1/audit"),
        "get_team_notifications": Route("GET", "/v1/teams/{team}/notifications"),
        "set_team_notifications": Route("PUT", "/v1/teams/{team}/notifications"),
        "send_test_notification": Route("POST", "/v1/teams/{team}/notifications/test"),
        "get_job_notifications": Route("GET", JOB + "/notifications"),
        "set_job_notifications": Route("PUT", JOB + "/notifications"),
        "delete_job_notifications": Route("DELETE", JOB + "/notifications"),
        "health": Route("GET", "/v1/healthz"),
        "ready": Route("GET", "/v1/readyz"),
        "metrics": Route("GET", "/v1/metrics"),
        "openapi": Route("GET", "/openapi.json"),
    }
)


@dataclass(frozen=True, slots=True)
class Answer:
    """A 2xx answer: its status, headers (names in lower case) and body (JSON, else text)."""

    status: int
    headers: Mapping[str, str]
    data: Any


NO_BODY: Any = object()  # a request without a body (None would be sent as JSON null)


@dataclass(frozen=True, slots=True)
class Call(Generic[T]):
    """One request and how to read its answer."""

    method: str
    path: str
    read: Callable[[Answer], T]
    params: tuple[tuple[str, str], ...] = ()
    body: Any = NO_BODY
    headers: Mapping[str, str] = field(default_factory=dict)


def _segment(value: str, what: str) -> str:
    if not value:
        raise ConfigurationError(f"{what} must not be empty")
    return quote(value, safe="")


def job_path(job: str) -> str:
    """The API path of the job ``job`` names: an id, or ``TEAM/NAME``."""
    if "/" not in job:
        return BY_ID.format(job_id=_segment(job, "a job id"))
    team, name = job.split("/", 1)
    return BY_NAME.format(team=_segment(team, "a job's team"), name=_segment(name, "a job's name"))


def _path(route: str, job: str | None, /, **parts: str) -> str:
    template = ROUTES[route].path
    if template.startswith(JOB):
        assert job is not None
        rest = template.removeprefix(JOB)
        return job_path(job) + rest.format(**{key: _segment(value, key) for key, value in parts.items()})
    return template.format(**{key: _segment(value, key) for key, value in parts.items()})


def _call(route: str, read: Callable[[Answer], T], /, *, job: str | None = None, **options: Any) -> Call[T]:
    named = ("team", "name", "run_id", "token_id", "backfill_id")
    parts = {key: options.pop(key) for key in named if key in options}
    return Call(ROUTES[route].method, _path(route, job, **parts), read, **options)


Scalar = str | int | float | bool


def _params(**query: Scalar | Sequence[str] | None) -> tuple[tuple[str, str], ...]:
    pairs: list[tuple[str, str]] = []
    for key, value in query.items():
        if value is None:
            continue
        if isinstance(value, bool):
            pairs.append((key, "true" if value else "false"))
        elif isinstance(value, (str, int, float)):
            pairs.append((key, str(value)))
        else:
            pairs.extend((key, str(item)) for item in value)
    return tuple(pairs)


def _if_match(version: int | None) -> dict[str, str]:
    return {} if version is None else {"If-Match": f'"{version}"'}


def _data(answer: Answer) -> Any:
    return answer.data


def _none(answer: Answer) -> None:
    return None


def _page(answer: Answer) -> Page[Any]:
    return Page(list(answer.data["items"]), answer.data["next_cursor"])


def _job(answer: Answer) -> Job:
    return cast(Job, answer.data)


def _labels(labels: Mapping[str, str] | Sequence[str]) -> list[str]:
    if isinstance(labels, Mapping):
        return [f"{key}={value}" for key, value in labels.items()]
    return list(labels)


# -- jobs ----------------------------------------------------------------------------------------


def create_job(spec: Mapping[str, Any]) -> Call[Job]:
    """Create a job from its definition (``team``, ``name``, ``schedule``, ``target``...)."""
    return _call("create_job", _job, body=dict(spec))


def validate_job(spec: Mapping[str, Any]) -> Call[JobValidation]:
    """Check a new job's definition as :func:`create_job` would, writing nothing: the definition
    as the server would store it, with its first slot, the schedule in words and its next fire
    times; or the :class:`~cronwheel.client.errors.Invalid` that creating it would raise."""
    return _call("validate_job", _data, body=dict(spec))


def validate_job_edit(job: str, spec: Mapping[str, Any]) -> Call[JobValidation]:
    """Check a whole new definition of the job as :func:`replace_job` would, writing nothing
    (see :func:`validate_job`)."""
    return _call("validate_job_edit", _data, job=job, body=dict(spec))


def list_jobs(
    *,
    team: str | None = None,
    name: str | None = None,
    labels: Mapping[str, str] | Sequence[str] = (),
    paused: bool | None = None,
    last_state: str | None = None,
    late: bool | None = None,
    include: Sequence[str] = (),
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[Page[Job]]:
    """One page of the jobs the token sees, oldest first (``labels``: each ``key=value`` required;
    ``late``: only late ones; ``include=["recent"]``: each job's newest runs in ``recent``)."""
    params = _params(
        team=team, name=name, label=_labels(labels), paused=paused, last_state=last_state,
        late=late or None, include=list(include) or None, limit=limit, cursor=cursor,
    )  # fmt: skip
    return _call("list_jobs", _page, params=params)


def get_job(job: str) -> Call[Job]:
    """One job (``job``: its id or ``TEAM/NAME``)."""
    return _call("get_job", _job, job=job)


def replace_job(job: str, spec: Mapping[str, Any], *, if_version: int | None = None) -> Call[Job]:
    """Replace the job's whole definition (PUT); with ``if_version``, only if still at it (else
    :class:`~cronwheel.client.errors.PreconditionFailed`)."""
    return _call("replace_job", _job, job=job, body=dict(spec), headers=_if_match(if_version))


def update_job(job: str, changes: Mapping[str, Any], *, if_version: int | None = None) -> Call[Job]:
    """Change only the fields given (PATCH), conditionally as :func:`replace_job`."""
    return _call("update_job", _job, job=job, body=dict(changes), headers=_if_match(if_version))


def delete_job(job: str, *, if_version: int | None = None) -> Call[None]:
    """Delete the job (its runs stay readable)."""
    return _call("delete_job", _none, job=job, headers=_if_match(if_version))


def pause_job(job: str, note: str | None = None) -> Call[Job]:
    return _call("pause_job", _job, job=job, body={} if note is None else {"note": note})


def resume_job(job: str, missed: Literal["skip", "misfire"] = "skip") -> Call[Job]:
    """Fire the job again; slots missed while paused are recorded SKIPPED or left to its misfire policy."""
    return _call("resume_job", _job, job=job, body={"missed": missed})


def _triggered(answer: Answer) -> Triggered:
    return Triggered(cast(Run, answer.data), answer.status == 201)


def trigger_job(
    job: str,
    payload: Any = NO_BODY,
    *,
    idempotency_key: str | None = None,
    traceparent: str | None = None,
    tracestate: str | None = None,
) -> Call[Triggered]:
    """Run the job now, once (with ``payload`` instead of the job's, when given); the same
    ``idempotency_key`` returns the same run (``created`` False). A W3C ``traceparent`` (and
    ``tracestate``) makes the run's trace a part of the caller's, on a server with tracing on."""
    body = {} if payload is NO_BODY else {"payload": payload}
    given = {"Idempotency-Key": idempotency_key, "traceparent": traceparent, "tracestate": tracestate}
    headers = {name: value for name, value in given.items() if value is not None}
    return _call("trigger_job", _triggered, job=job, body=body, headers=headers)


def backfill_job(
    job: str, start: str, end: str, *, dry_run: bool = False, confirm: bool = False
) -> Call[Backfill | BackfillPlan]:
    """Backfill the job's slots in [``start``, ``end``] (RFC 3339 with an offset) that have no
    run: the :class:`Backfill` accepted, whose progress :func:`job_backfills` shows; with
    ``dry_run``, the :class:`BackfillPlan` (nothing written). More slots than the server's
    confirmation limit need ``confirm``."""
    body = {"from": start, "to": end, "dry_run": dry_run, "confirm": confirm}
    return _call("backfill_job", _data, job=job, body=body)


def job_backfills(job: str, *, limit: int | None = None) -> Call[list[Backfill]]:
    """The job's backfills with their progress, newest first."""
    return _call("job_backfills", _items, job=job, params=_params(limit=limit))


def get_backfill(job: str, backfill_id: str) -> Call[Backfill]:
    """One backfill of the job and its progress."""
    return _call("get_backfill", _data, job=job, backfill_id=backfill_id)


def cancel_backfill(job: str, backfill_id: str) -> Call[Backfill]:
    """Stop the job's running backfill (its runs recorded so far stay): the backfill, now
    ``cancelled``; one that has ended is refused (409 ``not-running``)."""
    return _call("cancel_backfill", _data, job=job, backfill_id=backfill_id)


def _items(answer: Answer) -> list[Any]:
    return list(answer.data["items"])


def list_job_runs(
    job: str, *, states: Sequence[str] = (), limit: int | None = None, cursor: str | None = None
) -> Call[Page[Run]]:
    """One page of the job's runs, newest first (also those of a deleted job, by its id)."""
    return _call(
        "list_job_runs", _page, job=job, params=_params(state=list(states), limit=limit, cursor=cursor)
    )


# -- runs and schedules --------------------------------------------------------------------------


def list_runs(
    *,
    job_id: str | None = None,
    states: Sequence[str] = (),
    limit: int | None = None,
    cursor: str | None = None,
    team: str | None = None,
    reasons: Sequence[str] = (),
    since: str | None = None,
    until: str | None = None,
    late: bool | None = None,
) -> Call[Page[Run]]:
    """One page of the runs of every job the token sees, newest first: of one team, skipped for
    ``reasons``, with slots in [``since``, ``until``) (RFC 3339), started over 1 s late (``late``)."""
    params = _params(
        job_id=job_id, state=list(states), limit=limit, cursor=cursor, team=team,
        reason=list(reasons), since=since, until=until, late=late or None,
    )  # fmt: skip
    return _call("list_runs", _page, params=params)


def get_run(run_id: str) -> Call[RunDetail]:
    """One run with its attempts and its state history."""
    return _call("get_run", _data, run_id=run_id)


def get_run_output(run_id: str) -> Call[RunOutput]:
    """What each attempt of the run wrote, as kept (beyond the run's 1 KiB excerpts)."""
    return _call("get_run_output", _data, run_id=run_id)


def preview_schedule(
    expression: str,
    *,
    timezone: str = "UTC",
    count: int = 10,
    after: str | None = None,
    dst_gap: str | None = None,
    dst_fold: str | None = None,
    seed: str | None = None,
    jitter_s: float | None = None,
) -> Call[Preview]:
    """The next ``count`` fire times of ``expression`` in ``timezone``, with DST effects and warnings
    (with ``jitter_s`` and the job's id as ``seed``: when each fires)."""
    body: dict[str, Any] = {"expression": expression, "timezone": timezone, "count": count}
    optional = {"after": after, "dst_gap": dst_gap, "dst_fold": dst_fold, "seed": seed, "jitter_s": jitter_s}
    body.update({key: value for key, value in optional.items() if value is not None})
    return _call("preview_schedule", _data, body=body)


def cluster_status() -> Call[dict[str, Any]]:
    """Nodes, leader, shards, queues and active runs (an admin token of every team)."""
    return _call("cluster_status", _data)


def upcoming_fires(window_s: int = 3600, bucket_s: int = 1) -> Call[dict[str, Any]]:
    """How many jobs of the token's teams fire in each ``bucket_s`` of the next ``window_s``
    seconds, by team (live, unpaused jobs; what the dashboard's upcoming view draws)."""
    return _call("upcoming_fires", _data, params=_params(window=window_s, bucket=bucket_s))


# -- tokens --------------------------------------------------------------------------------------


def create_token(
    name: str, *, team: str | None, scopes: Sequence[str], expires_at: str | None = None
) -> Call[NewToken]:
    """Make a token of ``team`` (None: every team); the answer holds it, this once."""
    body = {"name": name, "team": team, "scopes": list(scopes), "expires_at": expires_at}
    return _call("create_token", _data, body=body)


def list_tokens(
    *,
    team: str | None = None,
    include_revoked: bool = False,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[Page[Token]]:
    params = _params(team=team, include_revoked=include_revoked or None, limit=limit, cursor=cursor)
    return _call("list_tokens", _page, params=params)


def get_token(token_id: str) -> Call[Token]:
    return _call("get_token", _data, token_id=token_id)


def revoke_token(token_id: str) -> Call[None]:
    return _call("revoke_token", _none, token_id=token_id)


# -- audit ---------------------------------------------------------------------------------------


def list_audit(
    *,
    team: str | None = None,
    action: str | None = None,
    actor: str | None = None,
    target: str | None = None,
    since: str | None = None,
    until: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Call[Page[AuditEntry]]:
    """One page of the audit log within the token's teams, newest first (an admin token);
    ``action`` is one (``job.update``) or a family (``job``), ``since``/``until`` RFC 3339."""
    params = _params(
        team=team,
        action=action,
        actor=actor,
        target=target,
        since=since,
        until=until,
        limit=limit,
        cursor=cursor,
    )
    return _call("list_audit", _page, params=params)


# -- secrets -------------------------------------------------------------------------------------


def list_secrets(team: str, *, limit: int | None = None, cursor: str | None = None) -> Call[Page[Secret]]:
    """One page of the team's secrets (names and key ids, never values)."""
    return _call("list_secrets", _page, team=team, params=_params(limit=limit, cursor=cursor))


def get_secret(team: str, name: str) -> Call[Secret]:
    return _call("get_secret", _data, team=team, name=name)


def _secret_set(answer: Answer) -> SecretSet:
    return SecretSet(cast(Secret, answer.data), answer.status == 201)


def set_secret(team: str, name: str, value: str) -> Call[SecretSet]:
    """Create or replace the secret (the value is write-only: no endpoint returns it)."""
    return _call("set_secret", _secret_set, team=team, name=name, body={"value": value})


def delete_secret(team: str, name: str) -> Call[None]:
    return _call("delete_secret", _none, team=team, name=name)


# -- calendars -------------------------------------------------------------------------------------


def list_calendars(team: str, *, limit: int | None = None, cursor: str | None = None) -> Call[Page[Calendar]]:
    """One page of the team's calendars, by name."""
    return _call("list_calendars", _page, team=team, params=_params(limit=limit, cursor=cursor))


def get_calendar(team: str, name: str) -> Call[Calendar]:
    return _call("get_calendar", _data, team=team, name=name)


def create_calendar(team: str, calendar: Mapping[str, Any]) -> Call[Calendar]:
    """Create a calendar (``name``, ``dates``, ``ranges``, ``weekdays``, ``holidays``, ``description``)."""
    return _call("create_calendar", _data, team=team, body=dict(calendar))


def replace_calendar(team: str, name: str, calendar: Mapping[str, Any]) -> Call[Calendar]:
    """Replace a calendar's days and description; the jobs that list it follow."""
    return _call("replace_calendar", _data, team=team, name=name, body=dict(calendar))


def delete_calendar(team: str, name: str) -> Call[None]:
    """Delete a calendar no job lists (409 naming the jobs that do)."""
    return _call("delete_calendar", _none, team=team, name=name)


# -- notifications -------------------------------------------------------------------------------


def get_team_notifications(team: str) -> Call[dict[str, Any]]:
    """The team's default notification rules (``{"rules": [...], "source": "team" | "none"}``)."""
    return _call("get_team_notifications", _data, team=team)


def set_team_notifications(team: str, rules: Sequence[Mapping[str, Any]]) -> Call[dict[str, Any]]:
    """Replace the team's default notification rules (``[]``: none)."""
    return _call("set_team_notifications", _data, team=team, body={"rules": list(rules)})


def send_test_notification(team: str, job: str | None = None) -> Call[dict[str, Any]]:
    """Queue a sample notification through the channels of the team's (or its job's) rules."""
    return _call("send_test_notification", _data, team=team, body={} if job is None else {"job": job})


def get_job_notifications(job: str) -> Call[dict[str, Any]]:
    """The rules in force for the job (its own, else its team's: ``source`` says which)."""
    return _call("get_job_notifications", _data, job=job)


def set_job_notifications(job: str, rules: Sequence[Mapping[str, Any]]) -> Call[dict[str, Any]]:
    """Give the job rules of its own in place of its team's default (``[]``: notify nothing)."""
    return _call("set_job_notifications", _data, job=job, body={"rules": list(rules)})


def delete_job_notifications(job: str) -> Call[None]:
    """Drop the job's own rules: its team's default applies again."""
    return _call("delete_job_notifications", _none, job=job)


def reencrypt_secrets() -> Call[Reencryption]:
    """Rewrite every secret under the server's newest key (an admin token of every team)."""
    return _call("reencrypt_secrets", _data)


# -- the process ---------------------------------------------------------------------------------


def health() -> Call[Health]:
    """The process is up (no token needed)."""
    return _call("health", _data)


def ready() -> Call[Ready]:
    """Every readiness check passes (else :class:`~cronwheel.client.errors.Unavailable`, whose
    problem's ``checks`` names the failed ones)."""
    return _call("ready", _data)


def metrics() -> Call[str]:
    """The Prometheus text of the process that answered."""
    return _call("metrics", _data)


def openapi() -> Call[dict[str, Any]]:
    """The OpenAPI document of the API."""
    return _call("openapi", _data)
