"""The API's notification rules: ``/v1/teams/{team}/notifications`` (the team's default),
``/v1/jobs/{job_id}/notifications`` (a job's own, also by team and name) and
``/v1/teams/{team}/notifications/test`` (a sample through the configured channels).

A job with rules of its own uses them; otherwise its team's default. ``PUT`` replaces the rules
(a job's ``[]`` silences it; the team's ``[]`` removes the default); ``DELETE`` on a job returns it
to the team default. Reads take the ``read`` scope, writes and tests ``write``; another team's
rules answer 404 as if they did not exist. A channel URL is checked as a target URL is (what the
HTTP client refuses, then the operator's SSRF policy), or is a reference to a team secret holding
it (``{"secret": NAME}``, checked at each delivery); a named secret must exist (422
``secret-not-found``). A channel URL that is a credential in clear
(:func:`cronwheel.notifications.rules.channel_credentials`: every Slack URL, a webhook URL with
user info or a token in its query) is refused (422 ``plain-credential``) unless the operator allows
plain credentials, or the rules stored in that place already hold it (same kind of channel, same
URL); a caller without the ``write`` scope reads such URLs masked.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Response
from pydantic import BaseModel, ConfigDict, Field, StringConstraints

from cronwheel.api.addressing import job_route
from cronwheel.api.callers.auditing import ActorDep
from cronwheel.api.callers.auth import CallerDep
from cronwheel.api.openapi import PROBLEM_DOC
from cronwheel.api.operations import job_for
from cronwheel.api.problems import ProblemError, field_error
from cronwheel.api.schemas.base import NAME_PATTERN
from cronwheel.api.schemas.targets import SecretRefSpec, _text_or_secret
from cronwheel.api.services import ApiServices, get_services
from cronwheel.audit import AuditAction
from cronwheel.auth.identity import Caller, Scope
from cronwheel.errors import InvalidInputError, NotFoundError
from cronwheel.jobs.service import PlainCredentialError, UnknownSecretError
from cronwheel.model import HttpTarget, SecretRef, new_id
from cronwheel.notifications.message import Notification
from cronwheel.notifications.rules import (
    EMAIL_PATTERN,
    MAX_CHANNELS,
    MAX_RECIPIENTS,
    MAX_RULES,
    MAX_SECONDS,
    Condition,
    EmailChannel,
    Event,
    Rule,
    channel_credentials,
    job_scope,
    masked_rules,
    rules_from_json,
    rules_to_json,
    team_scope,
    url_references,
)

router = APIRouter(tags=["notifications"])
Services = Annotated[ApiServices, Depends(get_services)]
Team = Annotated[str, Path(pattern=NAME_PATTERN, description="The team whose default rules these are.")]
Url = Annotated[str, StringConstraints(min_length=1, max_length=2000, pattern=r"^[hH][tT][tT][pP][sS]?://")]
UrlOrSecret = Annotated[Url | SecretRefSpec, _text_or_secret("an http(s) URL of at most 2000 characters")]
Seconds = Annotated[float, Field(gt=0, le=MAX_SECONDS)]


class WebhookIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["webhook"]
    url: UrlOrSecret = Field(
        description='Receives the notification as JSON, signed (Standard Webhooks); or {"secret": NAME}, '
        "a team secret holding the URL. A URL with user info or a token in its query is a credential."
    )
    signing_secret: Annotated[str, StringConstraints(pattern=NAME_PATTERN)] | None = Field(
        default=None, description="A team secret holding whsec_ keys; default: the team's `webhook-signing`."
    )


class SlackIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["slack"]
    url: UrlOrSecret = Field(
        description='A Slack-compatible incoming webhook: receives {"text": ...}. Its path is a token: '
        'give {"secret": NAME}, a team secret holding the URL.'
    )


class EmailIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    type: Literal["email"]
    to: list[Annotated[str, StringConstraints(pattern=f"^{EMAIL_PATTERN}$")]] = Field(
        min_length=1, max_length=MAX_RECIPIENTS, description="Sent through the server's SMTP relay."
    )


ChannelIn = Annotated[WebhookIn | SlackIn | EmailIn, Field(discriminator="type")]


class RuleIn(BaseModel):
    """When to notify whom. ``change`` is ``failure`` and ``recovery`` together."""

    model_config = ConfigDict(extra="forbid")
    conditions: list[Condition] = Field(min_length=1, max_length=5)
    channels: list[ChannelIn] = Field(min_length=1, max_length=MAX_CHANNELS)
    deadline_s: Seconds = Field(
        default=300.0, description="missed: a slot must reach a terminal state this long after its time."
    )
    late_s: Seconds = Field(default=60.0, description="late: fire lateness (queued - slot) above this.")


class RulesIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rules: list[RuleIn] = Field(max_length=MAX_RULES)


class RulesOut(BaseModel):
    rules: list[RuleIn]
    source: Literal["job", "team", "none"] = Field(
        description="Where the rules in force come from: the job's own, its team's default, or none."
    )


class TestIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    job: Annotated[str, StringConstraints(pattern=NAME_PATTERN)] | None = Field(
        default=None, description="A job of the team (its name): its rules, else the team's default."
    )


class TestOut(BaseModel):
    notification_id: str
    channels: int = Field(description="Deliveries queued (0: no rules apply).")


def _problems(*statuses: int) -> dict[int | str, dict[str, Any]]:
    descriptions = {
        400: "Malformed JSON",
        401: "No token, or one that is invalid, expired or revoked",
        403: "The token lacks the scope",
        404: "No such job (or a team the caller does not see)",
        422: "Invalid input; nothing was written",
    }
    return {status: {"description": descriptions[status], **PROBLEM_DOC} for status in statuses}


def _out(rules: tuple[Rule, ...], source: Literal["job", "team", "none"], caller: Caller) -> RulesOut:
    """The rules as ``caller`` may read them: their plain credential URLs masked unless the
    caller may write rules (a writer reads, and may write back, what is stored)."""
    shown = rules if caller.has(Scope.WRITE) else masked_rules(rules)
    return RulesOut(rules=[RuleIn.model_validate(rule) for rule in rules_to_json(shown)], source=source)


async def _checked(
    services: ApiServices, team: str, body: RulesIn, stored: tuple[Rule, ...] | None
) -> tuple[Rule, ...]:
    """The body as rules, or a 422 naming the field: a URL the HTTP client refuses
    (``target_invalid``) or the SSRF policy (``target_refused``), a credential in clear that
    ``stored`` (the rules in that place) does not already hold (``plain_credential``), a secret
    the team lacks (``secret_not_found``)."""
    raw = [rule.model_dump(mode="json") for rule in body.rules]
    try:
        rules = rules_from_json(raw)
    except InvalidInputError as error:
        raise _invalid(str(error).split(" ")[0], str(error), "target_invalid") from None
    policy = services.job_service.policy
    for r, rule in enumerate(rules):
        for c, channel in enumerate(rule.channels):
            if isinstance(channel, EmailChannel) or isinstance(channel.url, SecretRef):
                continue  # a reference is checked when resolved, at each delivery
            try:
                policy.check(HttpTarget(url=channel.url))
            except InvalidInputError as error:
                raise _invalid(
                    f"rules.{r}.channels.{c}.url", str(error).replace("target.url", "url"), "target_refused"
                ) from None
    if not policy.allow_plain_credentials:
        kept = {(channel.type, url) for _, channel, url in channel_credentials(stored or ())}
        plain = channel_credentials(rules)
        fields = [field for field, channel, url in plain if (channel.type, url) not in kept]
        if fields:
            raise PlainCredentialError(fields)
    references = url_references(rules)
    if references:
        found = await services.store.get_secrets(team, sorted({ref.name for _, ref in references}))
        missing = [(field, ref.name) for field, ref in references if ref.name not in found]
        if missing:
            raise UnknownSecretError(team, missing)
    return rules


def _invalid(where: str, message: str, code: str) -> ProblemError:
    field = where.replace("notifications[", "rules.").replace("].", ".").replace("[", ".").replace("]", "")
    return ProblemError(
        422, "validation", "Invalid request", message, errors=[field_error(field, message, code=code)]
    )


# -- the team's default ----------------------------------------------------------------------------


@router.get("/teams/{team}/notifications", response_model=RulesOut, responses=_problems(401, 403, 404))
async def get_team_notifications(team: Team, caller: CallerDep, services: Services) -> RulesOut:
    """The team's default notification rules (for its jobs without rules of their own)."""
    caller.require(Scope.READ, team, what=f"team {team!r}")
    rules = await services.store.notification_rules(team_scope(team))
    return _out(rules or (), "team" if rules else "none", caller)


@router.put(
    "/teams/{team}/notifications", response_model=RulesOut, responses=_problems(400, 401, 403, 404, 422)
)
async def put_team_notifications(
    team: Team, body: RulesIn, caller: CallerDep, actor: ActorDep, services: Services
) -> RulesOut:
    """Replace the team's default rules (``[]``: no default)."""
    caller.require(Scope.WRITE, team, what=f"team {team!r}")
    notices = services.store
    rules = await _checked(services, team, body, await notices.notification_rules(team_scope(team)))
    target = ("notifications", team_scope(team), team)
    if rules:
        entry = actor.entry(AuditAction.NOTIFICATIONS_SET, services.clock.now(), team, target)
        await notices.set_notification_rules(team_scope(team), team, None, rules, audit=entry)
    else:
        entry = actor.entry(AuditAction.NOTIFICATIONS_DELETE, services.clock.now(), team, target)
        await notices.delete_notification_rules(team_scope(team), audit=entry)
    return _out(rules, "team" if rules else "none", caller)


@router.post(
    "/teams/{team}/notifications/test",
    status_code=202,
    response_model=TestOut,
    responses=_problems(400, 401, 403, 404),
)
async def send_test_notification(team: Team, body: TestIn, caller: CallerDep, services: Services) -> TestOut:
    """Queue a sample notification (event ``test``) to every channel of the rules in force for
    the team's default or one of its jobs; the notifier delivers it as any other."""
    caller.require(Scope.WRITE, team, what=f"team {team!r}")
    notices = services.store
    job_id = job_name = None
    rules = None
    if body.job is not None:
        job = await services.store.find_job(team, body.job)
        if job is None:
            raise NotFoundError(f"no job {body.job!r} in team {team!r}")
        job_id, job_name = job.id, job.name
        rules = await notices.notification_rules(job_scope(job.id))
    if rules is None:
        rules = await notices.notification_rules(team_scope(team)) or ()
    now = services.clock.now()
    sample = Notification(f"ntf_test_{new_id()}", Event.TEST, team, job_id, job_name, now, detail="a sample")
    channels = list({repr(channel): channel for rule in rules for channel in rule.channels}.values())
    return TestOut(
        notification_id=sample.id, channels=await notices.enqueue_notification(sample, channels, now)
    )


# -- a job's own -----------------------------------------------------------------------------------


@job_route(router, "GET", "/notifications", response_model=RulesOut, responses=_problems(401, 403, 404))
async def get_job_notifications(job_id: str, caller: CallerDep, services: Services) -> RulesOut:
    """The rules in force for the job: its own, else its team's default (``source`` says which)."""
    job = await job_for(services, caller, job_id, Scope.READ)
    notices = services.store
    own = await notices.notification_rules(job_scope(job.id))
    if own is not None:
        return _out(own, "job", caller)
    default = await notices.notification_rules(team_scope(job.team))
    return _out(default or (), "team" if default else "none", caller)


@job_route(
    router,
    "PUT",
    "/notifications",
    response_model=RulesOut,
    responses=_problems(400, 401, 403, 404, 422),
)
async def put_job_notifications(
    job_id: str, body: RulesIn, caller: CallerDep, actor: ActorDep, services: Services
) -> RulesOut:
    """Give the job rules of its own, in place of its team's default (``[]``: notify nothing)."""
    job = await job_for(services, caller, job_id, Scope.WRITE)
    notices = services.store
    rules = await _checked(services, job.team, body, await notices.notification_rules(job_scope(job.id)))
    target = ("notifications", job_scope(job_id), job.name)
    entry = actor.entry(AuditAction.NOTIFICATIONS_SET, services.clock.now(), job.team, target)
    await notices.set_notification_rules(job_scope(job_id), job.team, job_id, rules, audit=entry)
    return _out(rules, "job", caller)


@job_route(router, "DELETE", "/notifications", status_code=204, responses=_problems(401, 403, 404))
async def delete_job_notifications(
    job_id: str, caller: CallerDep, actor: ActorDep, services: Services
) -> Response:
    """Drop the job's own rules: its team's default applies again."""
    job = await job_for(services, caller, job_id, Scope.WRITE)
    notices = services.store
    target = ("notifications", job_scope(job_id), job.name)
    entry = actor.entry(AuditAction.NOTIFICATIONS_DELETE, services.clock.now(), job.team, target)
    await notices.delete_notification_rules(job_scope(job_id), audit=entry)
    return Response(status_code=204)
