"""Notification rules: which conditions of a job notify which channels.

A job has its own rules, or (when it has none stored) its team's default rules. A rule is
``{"conditions": [...], "channels": [...], "deadline_s": ..., "late_s": ...}``:

* conditions: ``failure`` (a run FAILED after its last attempt), ``recovery`` (the first SUCCESS
  after a failure), ``change`` (both: every change of the job's outcome), ``missed`` (a slot not
  terminal ``deadline_s`` after its time: the dead-man's switch, and ``back`` when a slot completes
  again), ``late`` (a run fired more than ``late_s`` after its slot);
* channels: ``webhook`` (a signed Standard Webhooks POST, as HTTP targets are), ``slack`` (a
  Slack-compatible incoming webhook: ``{"text": ...}``), ``email`` (over the server's SMTP relay).
  A webhook's or Slack channel's ``url`` is a URL, or a reference to a team secret holding the
  whole URL (``{"secret": NAME}``), resolved by the notifier at each delivery.

Plain credentials (:func:`channel_credentials`): every Slack URL given in clear (its path is the
token that lets anyone post), and a webhook URL with user info or a query parameter named as a
credential (as :func:`cronwheel.targets.kinds.plain_credentials` judges a target URL). The API refuses
new ones unless the operator allows plain credentials, and shows them masked
(:func:`masked_rules`) to callers who may not write the team's rules.

Records are frozen; :func:`rules_from_json` / :func:`rules_to_json` are the one JSON form (the
store's column, the API's body, the CLI's file). Validation of URLs against the SSRF rules needs
the operator's policy and lives with the API (:mod:`cronwheel.api.routes.notifications`).
"""

from __future__ import annotations

import dataclasses
import enum
import re
from dataclasses import dataclass
from typing import Any, Literal

from yarl import URL

from cronwheel.errors import InvalidInputError
from cronwheel.model import HttpTarget, SecretRef
from cronwheel.redaction import HIDDEN
from cronwheel.targets.checks import SECRET_NAME, redacted_url
from cronwheel.targets.kinds import plain_credentials
from cronwheel.targets.kinds.http import check_http

MAX_RULES = 10
MAX_CHANNELS = 5
MAX_RECIPIENTS = 20
DEFAULT_DEADLINE_S = 300.0
DEFAULT_LATE_S = 60.0
MAX_SECONDS = 366 * 86400.0
EMAIL_PATTERN = r"[A-Za-z0-9._%+-]{1,64}@[A-Za-z0-9.-]{1,253}"  # plain ASCII: nothing to inject in a header
_EMAIL = re.compile(EMAIL_PATTERN)


class Condition(enum.StrEnum):
    FAILURE = "failure"
    RECOVERY = "recovery"
    CHANGE = "change"
    MISSED = "missed"
    LATE = "late"


class Event(enum.StrEnum):
    """What happened: the ``event`` of a notification (one transition of one aspect)."""

    FAILURE = "failure"
    RECOVERY = "recovery"
    MISSED = "missed"
    BACK = "back"  # a slot reached a terminal state again after ``missed``
    LATE = "late"
    TEST = "test"  # ``cronwheel notifications test``


# which conditions ask for which events
WANTED_BY: dict[Event, frozenset[Condition]] = {
    Event.FAILURE: frozenset({Condition.FAILURE, Condition.CHANGE}),
    Event.RECOVERY: frozenset({Condition.RECOVERY, Condition.CHANGE}),
    Event.MISSED: frozenset({Condition.MISSED}),
    Event.BACK: frozenset({Condition.MISSED}),
    Event.LATE: frozenset({Condition.LATE}),
    Event.TEST: frozenset(Condition),
}


@dataclass(frozen=True, slots=True)
class WebhookChannel:
    url: str | SecretRef  # the URL, or a team secret holding it
    signing_secret: str | None = None  # a team secret; None: the team's ``webhook-signing``, if any
    type: Literal["webhook"] = "webhook"


@dataclass(frozen=True, slots=True)
class SlackChannel:
    url: str | SecretRef  # the URL, or a team secret holding it
    type: Literal["slack"] = "slack"


@dataclass(frozen=True, slots=True)
class EmailChannel:
    to: tuple[str, ...]
    type: Literal["email"] = "email"


Channel = WebhookChannel | SlackChannel | EmailChannel


@dataclass(frozen=True, slots=True)
class Rule:
    conditions: frozenset[Condition]
    channels: tuple[Channel, ...]
    deadline_s: float = DEFAULT_DEADLINE_S  # ``missed``: how long after its slot a run may take
    late_s: float = DEFAULT_LATE_S  # ``late``: fire lateness (queued - slot) above this

    def wants(self, event: Event) -> bool:
        return bool(self.conditions & WANTED_BY[event])


def http_target(channel: WebhookChannel | SlackChannel, url: str | None = None) -> HttpTarget:
    """The HTTP request a webhook or Slack channel makes, as the worker's HTTP executor sends it
    (same SSRF guard, same Standard Webhooks signing: a Slack channel is signed with the team's
    ``webhook-signing`` secret when there is one, which Slack ignores). ``url``: the value of
    the secret the channel's URL refers to (required then)."""
    if url is None:
        if isinstance(channel.url, SecretRef):
            raise ValueError("a channel whose URL is a secret reference needs the resolved URL")
        url = channel.url
    secret = None
    if isinstance(channel, WebhookChannel) and channel.signing_secret is not None:
        secret = SecretRef(channel.signing_secret)
    return HttpTarget(url=url, method="POST", signing_secret=secret)


# -- credentials ---------------------------------------------------------------------------------


def channel_credentials(rules: tuple[Rule, ...]) -> list[tuple[str, Channel, str]]:
    """The channel URLs ``rules`` hold as credentials in clear, as (field, channel, URL), the
    field as the API names it (``rules.0.channels.1.url``): every Slack URL given in clear (its
    path is the token), and a webhook URL that :func:`cronwheel.targets.kinds.plain_credentials` calls
    a credential (user info, or a query parameter such as ``?token=``)."""
    found: list[tuple[str, Channel, str]] = []
    for r, rule in enumerate(rules):
        for c, channel in enumerate(rule.channels):
            url = _plain_url(channel)
            if url is not None:
                found.append((f"rules.{r}.channels.{c}.url", channel, url))
    return found


def _plain_url(channel: Channel) -> str | None:
    """The channel's URL when it is a credential in clear."""
    if isinstance(channel, EmailChannel) or not isinstance(channel.url, str):
        return None
    if isinstance(channel, SlackChannel) or plain_credentials(HttpTarget(url=channel.url)):
        return channel.url
    return None


def masked_rules(rules: tuple[Rule, ...]) -> tuple[Rule, ...]:
    """``rules`` with each URL of :func:`channel_credentials` masked: a Slack URL keeps its scheme
    and host (``https://hooks.slack.com/***``), a webhook URL is shown as
    :func:`cronwheel.targets.checks.redacted_url` shows it; references and other channels as they are."""
    return tuple(dataclasses.replace(rule, channels=tuple(map(_masked, rule.channels))) for rule in rules)


def _masked(channel: Channel) -> Channel:
    url = _plain_url(channel)
    if url is None:
        return channel
    if isinstance(channel, SlackChannel):
        return dataclasses.replace(channel, url=masked_origin(url))
    if isinstance(channel, WebhookChannel):
        return dataclasses.replace(channel, url=redacted_url(url))
    return channel


def masked_origin(text: str) -> str:
    """``https://hooks.slack.com/***``: the URL's scheme, host and port, the rest masked."""
    try:
        return f"{URL(text).origin()}/{HIDDEN}"
    except (ValueError, TypeError):
        return "(a URL that does not parse)"


def url_references(rules: tuple[Rule, ...]) -> list[tuple[str, SecretRef]]:
    """The team secrets ``rules`` refer to, as (field, reference): channel URLs given as
    references, and named signing secrets."""
    found: list[tuple[str, SecretRef]] = []
    for r, rule in enumerate(rules):
        for c, channel in enumerate(rule.channels):
            where = f"rules.{r}.channels.{c}"
            if isinstance(channel, EmailChannel):
                continue
            if isinstance(channel.url, SecretRef):
                found.append((f"{where}.url", channel.url))
            if isinstance(channel, WebhookChannel) and channel.signing_secret is not None:
                found.append((f"{where}.signing_secret", SecretRef(channel.signing_secret)))
    return found


# -- JSON ----------------------------------------------------------------------------------------


def rules_to_json(rules: tuple[Rule, ...]) -> list[dict[str, Any]]:
    return [rule_to_json(rule) for rule in rules]


def rule_to_json(rule: Rule) -> dict[str, Any]:
    return {
        "conditions": sorted(c.value for c in rule.conditions),
        "channels": [channel_to_json(channel) for channel in rule.channels],
        "deadline_s": rule.deadline_s,
        "late_s": rule.late_s,
    }


def channel_to_json(channel: Channel) -> dict[str, Any]:
    if isinstance(channel, WebhookChannel):
        return {"type": "webhook", "url": _url_json(channel.url), "signing_secret": channel.signing_secret}
    if isinstance(channel, SlackChannel):
        return {"type": "slack", "url": _url_json(channel.url)}
    return {"type": "email", "to": list(channel.to)}


def _url_json(url: str | SecretRef) -> str | dict[str, str]:
    return url if isinstance(url, str) else {"secret": url.name}


def rules_from_json(value: Any) -> tuple[Rule, ...]:
    """Rules from their JSON form; :class:`InvalidInputError` names the field at fault (and never
    quotes a URL: its query may hold a token, as Slack's do)."""
    if not isinstance(value, list):
        raise InvalidInputError("notifications must be a list of rules")
    if len(value) > MAX_RULES:
        raise InvalidInputError(f"notifications: at most {MAX_RULES} rules")
    return tuple(_rule(item, f"notifications[{index}]") for index, item in enumerate(value))


def _rule(value: Any, where: str) -> Rule:
    _object(value, where, {"conditions", "channels", "deadline_s", "late_s"})
    conditions = value.get("conditions")
    if not isinstance(conditions, list) or not conditions:
        raise InvalidInputError(f"{where}.conditions must be a non-empty list")
    known = {c.value for c in Condition}
    for index, condition in enumerate(conditions):
        if condition not in known:
            raise InvalidInputError(f"{where}.conditions[{index}] must be one of {', '.join(sorted(known))}")
    channels = value.get("channels")
    if not isinstance(channels, list) or not 1 <= len(channels) <= MAX_CHANNELS:
        raise InvalidInputError(f"{where}.channels must be a list of 1 to {MAX_CHANNELS} channels")
    return Rule(
        conditions=frozenset(Condition(c) for c in conditions),
        channels=tuple(_channel(item, f"{where}.channels[{i}]") for i, item in enumerate(channels)),
        deadline_s=_seconds(value.get("deadline_s", DEFAULT_DEADLINE_S), f"{where}.deadline_s"),
        late_s=_seconds(value.get("late_s", DEFAULT_LATE_S), f"{where}.late_s"),
    )


def _channel(value: Any, where: str) -> Channel:
    kind = value.get("type") if isinstance(value, dict) else None
    if kind == "webhook":
        _object(value, where, {"type", "url", "signing_secret"})
        secret = value.get("signing_secret")
        if secret is not None and not (isinstance(secret, str) and SECRET_NAME.fullmatch(secret)):
            raise InvalidInputError(f"{where}.signing_secret must be the name of a team secret")
        return WebhookChannel(_url(value.get("url"), f"{where}.url"), secret)
    if kind == "slack":
        _object(value, where, {"type", "url"})
        return SlackChannel(_url(value.get("url"), f"{where}.url"))
    if kind == "email":
        _object(value, where, {"type", "to"})
        to = value.get("to")
        if not isinstance(to, list) or not 1 <= len(to) <= MAX_RECIPIENTS:
            raise InvalidInputError(f"{where}.to must be a list of 1 to {MAX_RECIPIENTS} addresses")
        for index, address in enumerate(to):
            if not isinstance(address, str) or not _EMAIL.fullmatch(address):
                raise InvalidInputError(f"{where}.to[{index}] is not an email address")
        return EmailChannel(tuple(to))
    raise InvalidInputError(f"{where}.type must be webhook, slack or email")


def _object(value: Any, where: str, allowed: set[str]) -> None:
    if not isinstance(value, dict):
        raise InvalidInputError(f"{where} must be an object")
    extra = sorted(set(value) - allowed)
    if extra:
        raise InvalidInputError(f"{where} has unknown field {extra[0]!r}")


def _url(value: Any, where: str) -> str | SecretRef:
    """A URL (checked as a target's, never quoted), or a reference ``{"secret": NAME}`` to a team
    secret holding one (checked when resolved, at each delivery)."""
    if isinstance(value, dict):
        name = value.get("secret")
        if set(value) != {"secret"} or not isinstance(name, str) or not SECRET_NAME.fullmatch(name):
            raise InvalidInputError(
                f'{where} must be a URL or {{"secret": NAME}}, NAME the name of a team secret'
            )
        return SecretRef(name)
    if not isinstance(value, str) or len(value) > 2000:
        raise InvalidInputError(
            f'{where} must be an http(s) URL of at most 2000 characters, or {{"secret": NAME}}'
        )
    try:
        check_http(HttpTarget(url=value))
    except InvalidInputError as error:
        raise InvalidInputError(str(error).replace("target.url", where)) from None
    return value


def _seconds(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value <= MAX_SECONDS:
        raise InvalidInputError(f"{where} must be a number of seconds in (0, {MAX_SECONDS:g}]")
    return float(value)


# -- scopes: whose rules -----------------------------------------------------------------------------


def team_scope(team: str) -> str:
    """The scope of a team's default rules."""
    return f"team:{team}"


def job_scope(job_id: str) -> str:
    """The scope of one job's own rules."""
    return f"job:{job_id}"
