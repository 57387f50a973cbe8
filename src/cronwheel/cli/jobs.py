"""``cronwheel jobs ...``: create, list, inspect, edit, pause, resume and trigger jobs over the API.

A job is named by its id or as ``TEAM/NAME``.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence
from typing import Any, Literal

import click

from cronwheel.cli import global_options as shared
from cronwheel.cli.completion import job_argument
from cronwheel.cli.env_option import EnvOption
from cronwheel.cli.output import (
    SECONDS,
    Column,
    Ctx,
    api_command,
    columns_table,
    fields,
    load_documents,
    parse_json,
    parse_pairs,
    when,
)
from cronwheel.cli.watching import every, show_listing, watch_options
from cronwheel.client.types import Job, Page
from cronwheel.schedule.calendar import CalendarShift
from cronwheel.schedule.elapsed import is_elapsed
from cronwheel.targets.kinds import KINDS, summary
from cronwheel.targets.kinds import flags as target_flags
from cronwheel.targets.kinds.base import Flag

STATES = ("PENDING", "RUNNING", "RETRYING", "SUCCESS", "FAILED", "SKIPPED")


# -- rendering -----------------------------------------------------------------------------------


def _last(job: dict[str, Any]) -> str | None:
    last = job.get("last_run")
    return None if last is None else f"{last['state']} {when(last['slot'])}"


def next_run(job: dict[str, Any]) -> str | None:
    """When the job fires next; a paused job does not, whatever its stored cursor says (the
    cursor stays at the slot it paused before, a time that is past by now); a job with no slot
    left (a one-time job that fired, an ``end_at`` that passed) is complete. A jittered slot
    says when it fires."""
    if job["paused"]:
        return "paused"
    slot = when(job["next_run_at"])
    if slot is None:
        return "complete"
    fires = job.get("next_fire_at")
    return slot if not fires or fires == job["next_run_at"] else f"{slot} (fires {when(fires)})"


def _jitter(job: dict[str, Any]) -> str | None:
    """The job's jitter window in words (None: it fires at its slots)."""
    jitter = job.get("jitter_s") or 0
    return f"up to {jitter:g}s after each slot (offset fixed by job id and slot)" if jitter else None


JOB_COLUMNS: tuple[Column, ...] = (
    ("ID", lambda job: job["id"]),
    ("TEAM", lambda job: job["team"]),
    ("NAME", lambda job: job["name"]),
    ("SCHEDULE", lambda job: job["schedule"]),
    ("TIMEZONE", lambda job: job["timezone"]),
    ("NEXT RUN", next_run),
    ("LAST RUN", _last),
    ("PAUSED", lambda job: job["paused"]),
)
WIDE_JOB_COLUMNS: tuple[Column, ...] = (
    *JOB_COLUMNS,
    ("TARGET", lambda job: job["target"]["type"]),
    ("QUEUE", lambda job: job["queue"]),
    ("OVERLAP", lambda job: job["overlap"]),
    ("MISFIRE", lambda job: job["misfire"]["policy"]),
    ("VERSION", lambda job: job["version"]),
    ("LABELS", lambda job: job["labels"]),
)
"""``jobs list -o wide``: what the table shows, then how the job fires and what it is labelled."""


def jobs_table(jobs: list[dict[str, Any]], columns: Sequence[Column] = JOB_COLUMNS) -> str:
    return columns_table(columns, jobs) if jobs else "no jobs"


def wide_jobs_table(jobs: list[dict[str, Any]]) -> str:
    return jobs_table(jobs, WIDE_JOB_COLUMNS)


def _retry(retry: dict[str, Any]) -> str:
    attempts = retry["max_attempts"]
    jitter = ", jitter" if retry["jitter"] else ""
    return (
        f"{attempts} attempt{'s' if attempts != 1 else ''}, {retry['initial_delay_s']:g}s"
        f" x{retry['multiplier']:g} up to {retry['max_delay_s']:g}s{jitter}"
    )


def _secrets(target: dict[str, Any]) -> str | None:
    """The target's references to team secrets: ``Authorization={secret: billing-api-key}``."""
    values = target.get("headers") or target.get("env") or target.get("metadata") or {}
    found = [
        f"{key}={{secret: {value['secret']}}}" for key, value in values.items() if isinstance(value, dict)
    ]
    for key in ("user", "username", "password", "token"):  # broker credentials
        if isinstance(target.get(key), dict):
            found.append(f"{key}={{secret: {target[key]['secret']}}}")
    if target.get("signing_secret"):
        found.append(f"signed with {{secret: {target['signing_secret']['secret']}}}")
    return " ".join(found) or None


def _plain(job: dict[str, Any]) -> str | None:
    plain = job.get("plain_values") or []
    if not plain:
        return None
    return (
        f"{' '.join(plain)} (held in clear in the job; `cronwheel secrets adopt {job['team']}/{job['name']}`)"
    )


def _retention(policy: dict[str, Any] | None) -> str:
    """The job's retention in words (null: the server's default)."""
    if policy is None:
        return "server default"
    limits = [f"{policy['keep_days']} days"] if policy.get("keep_days") else []
    limits += [f"newest {policy['keep_runs']} runs"] if policy.get("keep_runs") else []
    return ", ".join(limits) if limits else "whole history"


def _calendars(job: dict[str, Any]) -> str | None:
    """The calendars the job skips the closed days of, and its shift (None: no calendars)."""
    names = job.get("calendars") or []
    if not names:
        return None
    shift = job.get("calendar_shift") or "none"
    return ", ".join(names) + ("" if shift == "none" else f" (shift to the {shift} open day)")


def _dst(job: dict[str, Any]) -> str:
    if is_elapsed(job["schedule"]):
        return "none: elapsed time"
    return f"gap={job['dst_gap'] or 'default'} fold={job['dst_fold'] or 'default'}"


def job_view(job: dict[str, Any]) -> str:
    retry = job["retry"]
    misfire = job["misfire"]
    return fields(
        [
            ("id", job["id"]),
            ("team/name", f"{job['team']}/{job['name']}"),
            ("version", job["version"]),
            ("schedule", f"{job['schedule']}  ({job['timezone']})"),
            ("in words", job.get("schedule_description")),
            ("dst", _dst(job)),
            ("target", summary(job["target"])),
            ("secrets", _secrets(job["target"])),
            ("in clear", _plain(job)),
            ("description", job["description"] or None),
            ("queue", job["queue"]),
            ("timeout", f"{job['timeout_s']:g}s"),
            ("retry", _retry(retry)),
            ("misfire", f"{misfire['policy']} (grace {misfire['grace_s']:g}s, max catch-up"
             f" {misfire['max_catch_up']})"),
            ("overlap", job["overlap"]),
            ("jitter", _jitter(job)),
            ("window", None if not (job["start_at"] or job["end_at"])
             else f"{when(job['start_at']) or '-'} .. {when(job['end_at']) or '-'}"),
            ("labels", job["labels"]),
            ("retention", _retention(job.get("retention"))),
            ("on success", "delete the job" if job.get("delete_after_success") else None),
            ("calendars", _calendars(job)),
            ("paused", job["paused"] if not job["paused"] else f"yes ({job['pause_note'] or 'no note'})"),
            ("next run", next_run(job)),
            ("last run", _last(job)),
            ("updated", when(job["updated_at"])),
        ]
    )  # fmt: skip


# -- the group -----------------------------------------------------------------------------------


@shared.group(*shared.GLOBAL)
def jobs(**_: Any) -> None:
    """Create, list, edit, pause, resume and trigger jobs (over the REST API)."""


def _option(flag: Flag) -> Any:
    """A target kind's flag as a click option."""
    extra: dict[str, Any] = {}
    if flag.is_flag:
        extra.update(is_flag=True, default=None)
    if flag.choices:
        extra["type"] = click.Choice(list(flag.choices))
    return click.option(
        flag.name, flag.dest, help=flag.help, metavar=flag.metavar, multiple=flag.multiple, **extra
    )


def _grpc_target_from_flags(flags: dict[str, Any]) -> dict[str, Any] | None:
    """The gRPC target the flags give (``--grpc`` and its companions), or None."""
    grpc_only = ("grpc_method", "grpc_tls", "metadata", "secret_metadata")
    if not flags.get("grpc_address"):
        if any(flags.get(key) for key in grpc_only):
            raise click.UsageError(
                "--grpc-method, --grpc-tls, --metadata and --secret-metadata go with --grpc"
            )
        return None
    if not flags.get("grpc_method"):
        raise click.UsageError("--grpc needs --grpc-method PKG.SVC/METHOD")
    target: dict[str, Any] = {
        "type": "grpc",
        "address": flags["grpc_address"],
        "method": flags["grpc_method"],
    }
    if flags.get("grpc_tls"):
        target["tls"] = True
    metadata: dict[str, Any] = parse_pairs(flags.get("metadata") or (), "--metadata")
    for key, name in parse_pairs(flags.get("secret_metadata") or (), "--secret-metadata").items():
        metadata[key] = {"secret": name}
    if metadata:
        target["metadata"] = metadata
    return target


def _spec_options(func: Any) -> Any:
    options = [
        click.option("--team", help="Owning team."),
        click.option("--name", help="Job name, unique within the team."),
        click.option("--schedule", help='Cron expression, such as "0 3 * * *".'),
        click.option("--tz", "timezone", help="IANA time zone of the schedule (default UTC)."),
        *(_option(flag) for flag in target_flags()),
        click.option("--payload", help="JSON payload."),
        click.option("--label", "labels", multiple=True, metavar="K=V", help="Label (repeat)."),
        click.option("--queue", help="Worker queue."),
        click.option("--timeout", "timeout_s", type=float, help="Seconds an attempt may take."),
        click.option("--max-attempts", type=int, help="Attempts per run (retries + 1)."),
        click.option("--overlap", type=click.Choice(["allow", "forbid", "replace"])),
        click.option(
            "--jitter",
            "jitter_s",
            type=SECONDS,
            help="Fire each slot up to this long after it (30s, 1.5, 2m; 0: at the slot), at an "
            "offset fixed by the job id and the slot.",
        ),
        click.option("--misfire", type=click.Choice(["skip", "run_once", "catch_up"])),
        click.option("--description"),
        click.option("--start-at", help="RFC 3339 instant before which the job does not fire."),
        click.option("--end-at", help="RFC 3339 instant after which the job does not fire."),
        click.option("--dst-gap", type=click.Choice(["shift", "skip"])),
        click.option("--dst-fold", type=click.Choice(["first", "last", "both"])),
        click.option(
            "--delete-after-success/--keep-after-success",
            "delete_after_success",
            default=None,
            help="One-time (@at) jobs: delete the job when its run succeeds.",
        ),
        click.option(
            "--calendar",
            "calendars",
            multiple=True,
            metavar="NAME",
            help="A calendar of the team whose closed days the job skips (repeat).",
        ),
        click.option(
            "--calendar-shift",
            type=click.Choice([shift.value for shift in CalendarShift]),
            help="Where a skipped slot's run goes: none, or the next/previous open day.",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def spec_from_flags(flags: dict[str, Any]) -> dict[str, Any]:
    """The job fields the flags give (only those given)."""
    spec: dict[str, Any] = {}
    for key in ("team", "name", "schedule", "timezone", "queue", "timeout_s", "overlap", "jitter_s",
                "description", "start_at", "end_at", "dst_gap", "dst_fold", "calendar_shift",
                "delete_after_success"):  # fmt: skip
        if flags.get(key) is not None:
            spec[key] = flags[key]
    target = _target_from_flags(flags)
    if target is not None:
        spec["target"] = target
    if flags.get("payload") is not None:
        spec["payload"] = parse_json(flags["payload"], "--payload")
    if flags.get("labels"):
        spec["labels"] = parse_pairs(flags["labels"], "--label")
    if flags.get("calendars"):
        spec["calendars"] = list(flags["calendars"])
    if flags.get("max_attempts") is not None:
        spec["retry"] = {"max_attempts": flags["max_attempts"]}
    if flags.get("misfire"):
        spec["misfire"] = {"policy": flags["misfire"]}
    return spec


def _target_from_flags(flags: dict[str, Any]) -> dict[str, Any] | None:
    chosen = [kind.flags[0] for kind in KINDS.values()]  # each kind's first flag names its target
    if sum(1 for flag in chosen if flags.get(flag.dest)) > 1:
        names = [flag.name for flag in chosen]
        raise click.UsageError(f"give one target: {', '.join(names[:-1])} or {names[-1]}")
    broker = _amqp_kafka_target(flags) or _broker_target(flags)
    if broker is not None:
        return broker
    http_only = ("method", "headers", "secret_headers", "signing_secret")
    if any(flags.get(key) for key in http_only) and not flags.get("http_url"):
        raise click.UsageError("--method, --header, --secret-header and --signing-secret go with --http")
    return _grpc_target_from_flags(flags) or _http_target(flags) or _local_target(flags)


def _http_target(flags: dict[str, Any]) -> dict[str, Any] | None:
    """An http target from ``--http`` and its flags; header values as given or secret references."""
    if not flags.get("http_url"):
        return None
    target: dict[str, Any] = {"type": "http", "url": flags["http_url"]}
    if flags.get("method"):
        target["method"] = flags["method"]
    headers: dict[str, Any] = parse_pairs(flags.get("headers") or (), "--header")
    for key, name in parse_pairs(flags.get("secret_headers") or (), "--secret-header").items():
        headers[key] = {"secret": name}
    if headers:
        target["headers"] = headers
    if flags.get("signing_secret"):
        target["signing_secret"] = {"secret": flags["signing_secret"]}
    return target


def _local_target(flags: dict[str, Any]) -> dict[str, Any] | None:
    """A command or python target (run on the worker itself)."""
    if flags.get("command"):
        return {"type": "command", "argv": shlex.split(flags["command"])}
    if flags.get("function"):
        return {"type": "python", "function": flags["function"]}
    return None


_NATS_ONLY = ("subject", "jetstream", "broker_token_secret")
_MQTT_ONLY = ("topic", "qos", "retain")
_BROKER = ("broker_user", "broker_user_secret", "broker_password_secret")


def _broker_target(flags: dict[str, Any]) -> dict[str, Any] | None:
    """A nats or mqtt target from its flags; credentials only as secret references (a plain
    user name is not a credential)."""
    _check_nats_mqtt_flags(flags)
    if flags.get("nats_url"):
        return _with_credentials(_nats_target(flags), flags, user_key="user")
    if flags.get("mqtt_url"):
        return _with_credentials(_mqtt_target(flags), flags, user_key="username")
    return None


def _check_nats_mqtt_flags(flags: dict[str, Any]) -> None:
    """Flags of a nats or mqtt target without it."""
    nats, mqtt = flags.get("nats_url"), flags.get("mqtt_url")
    if any(flags.get(key) is not None for key in _NATS_ONLY) and not nats:
        raise click.UsageError("--subject, --jetstream and --broker-token-secret go with --nats")
    if any(flags.get(key) is not None for key in _MQTT_ONLY) and not mqtt:
        raise click.UsageError("--topic, --qos and --retain go with --mqtt")
    if any(flags.get(key) for key in _BROKER) and not (nats or mqtt):
        raise click.UsageError(
            "--broker-user, --broker-user-secret and --broker-password-secret go with --nats or --mqtt"
        )
    _check_one_user(flags)


def _check_one_user(flags: dict[str, Any]) -> None:
    if flags.get("broker_user") and flags.get("broker_user_secret"):
        raise click.UsageError("give --broker-user or --broker-user-secret, not both")


def _nats_target(flags: dict[str, Any]) -> dict[str, Any]:
    target: dict[str, Any] = {"type": "nats", "url": flags["nats_url"], "subject": flags.get("subject")}
    if flags.get("jetstream"):
        target["jetstream"] = True
    return target


def _mqtt_target(flags: dict[str, Any]) -> dict[str, Any]:
    target: dict[str, Any] = {"type": "mqtt", "url": flags["mqtt_url"], "topic": flags.get("topic")}
    if flags.get("qos"):
        target["qos"] = int(flags["qos"])
    if flags.get("retain"):
        target["retain"] = True
    return target


def _with_credentials(target: dict[str, Any], flags: dict[str, Any], *, user_key: str) -> dict[str, Any]:
    """``target`` with the ``--broker-*`` user name (plain or a secret reference), password and
    token (secret references) the flags give."""
    if flags.get("broker_user"):
        target[user_key] = flags["broker_user"]
    for flag, key in (("broker_user_secret", user_key), ("broker_password_secret", "password"),
                      ("broker_token_secret", "token")):  # fmt: skip
        if flags.get(flag):
            target[key] = {"secret": flags[flag]}
    return target


_RABBITMQ_ONLY = {"exchange": "--exchange", "routing_key": "--routing-key"}
_KAFKA_ONLY = {"kafka_key": "--key", "kafka_tls": "--kafka-tls", "sasl_mechanism": "--sasl-mechanism"}


def _amqp_kafka_target(flags: dict[str, Any]) -> dict[str, Any] | None:
    """A rabbitmq or kafka target from its flags (``--topic``, ``--header``, ``--secret-header``
    and the ``--broker-*`` credentials shared with the other targets), or None; credentials only
    as secret references (a plain user name is not a credential)."""
    rabbitmq, kafka = flags.get("rabbitmq_url"), flags.get("kafka_servers")
    _check_amqp_kafka_flags(flags)
    if rabbitmq:
        if not flags.get("routing_key"):
            raise click.UsageError("--rabbitmq needs --routing-key")
        target: dict[str, Any] = {"type": "rabbitmq", "url": rabbitmq, "routing_key": flags["routing_key"]}
        if flags.get("exchange") is not None:
            target["exchange"] = flags["exchange"]
    elif kafka:
        if not flags.get("topic"):
            raise click.UsageError("--kafka needs --topic")
        servers = [server.strip() for server in kafka.split(",") if server.strip()]
        target = {"type": "kafka", "bootstrap_servers": servers, "topic": flags["topic"]}
        for key, field in (("kafka_key", "key"), ("kafka_tls", "tls"), ("sasl_mechanism", "sasl_mechanism")):
            if flags.get(key) is not None:
                target[field] = flags[key]
    else:
        return None
    return _with_headers_and_credentials(target, flags)


def _with_headers_and_credentials(target: dict[str, Any], flags: dict[str, Any]) -> dict[str, Any]:
    headers: dict[str, Any] = parse_pairs(flags.get("headers") or (), "--header")
    for key, name in parse_pairs(flags.get("secret_headers") or (), "--secret-header").items():
        headers[key] = {"secret": name}
    if headers:
        target["headers"] = headers
    return _with_credentials(target, flags, user_key="username")


_NOT_AMQP_KAFKA = {
    "subject": "--subject", "jetstream": "--jetstream", "qos": "--qos", "retain": "--retain",
    "broker_token_secret": "--broker-token-secret", "method": "--method",
    "signing_secret": "--signing-secret",
}  # fmt: skip


def _check_amqp_kafka_flags(flags: dict[str, Any]) -> None:
    """Flags of one of these two targets without it, or of another target with one of them."""
    rabbitmq, kafka = flags.get("rabbitmq_url"), flags.get("kafka_servers")
    for only, chosen, name in ((_RABBITMQ_ONLY, rabbitmq, "--rabbitmq"), (_KAFKA_ONLY, kafka, "--kafka")):
        given = [option for key, option in only.items() if flags.get(key) is not None]
        if given and not chosen:
            raise click.UsageError(f"{', '.join(given)} go(es) with {name}")
    if not (rabbitmq or kafka):
        return
    others = [option for key, option in _NOT_AMQP_KAFKA.items() if flags.get(key) is not None]
    if rabbitmq and flags.get("topic") is not None:
        others.append("--topic")
    if others:
        raise click.UsageError(
            f"{', '.join(others)} do(es) not go with {'--rabbitmq' if rabbitmq else '--kafka'}"
        )
    _check_one_user(flags)


def _one_spec(path: str) -> dict[str, Any]:
    documents = load_documents(path)
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise click.BadParameter(
            f"{path} must hold one job (a mapping); use `cronwheel apply -f` for several", param_hint="-f"
        )
    spec: dict[str, Any] = documents[0]
    return spec


@jobs.command("create")
@click.option("-f", "--file", "path", metavar="FILE", help="Job definition (YAML or JSON; - for stdin).")
@_spec_options
@api_command
def create(ctx: Ctx, path: str | None, **flags: Any) -> None:
    """Create a job from a file and/or flags (flags override the file).

    \b
    Examples:
      cronwheel jobs create --team data --name nightly --schedule "0 3 * * *" \\
          --tz Europe/Berlin --http https://hooks.example.com/nightly
      cronwheel jobs create --team data --name export --schedule "0 * * * *" \\
          --nats nats://nats.example.com:4222 --subject exports.hourly --jetstream \\
          --broker-token-secret nats-token
      cronwheel jobs create --team plant --name report --schedule "*/5 * * * *" \\
          --mqtt mqtts://mqtt.example.com:8883 --topic plant/3/reports --qos 2 \\
          --broker-user reporter --broker-password-secret mqtt-password
      cronwheel jobs create -f nightly.yaml
    """
    spec = _one_spec(path) if path else {}
    spec.update(spec_from_flags(flags))
    ctx.emit(ctx.client.create_job(spec), job_view)


@jobs.command("list")
@click.option("--team", help="Only this team's jobs.")
@click.option("--name", help="Only jobs with this name.")
@click.option("--label", "labels", multiple=True, metavar="K=V", help="Only jobs with this label (repeat).")
@click.option("--paused/--active", default=None, help="Only paused / only active jobs.")
@click.option("--last-state", type=click.Choice(STATES, case_sensitive=False), help="State of the last run.")
@click.option("--late", is_flag=True, help="Only late jobs (a slot more than 60 s past, not fired).")
@click.option("--limit", type=click.IntRange(1, 100_000), default=100, show_default=True)
@click.option("--cursor", help="Continue from a cursor a previous list printed.")
@watch_options
@api_command(wide=True)
def list_(
    ctx: Ctx,
    team: str | None,
    name: str | None,
    labels: tuple[str, ...],
    paused: bool | None,
    last_state: str | None,
    late: bool,
    limit: int,
    cursor: str | None,
    watching: bool,
    interval: float | None,
) -> None:
    """List jobs (-o wide: with target kind, queue, policies, version and labels; --watch:
    again whenever the list changes)."""
    parse_pairs(labels, "--label")
    state = None if last_state is None else last_state.upper()
    watch_s = every(watching, interval)

    def page(size: int, after: str | None) -> Page[Job]:
        return ctx.client.list_jobs(
            team=team,
            name=name,
            labels=labels,
            paused=paused,
            last_state=state,
            late=late,
            limit=size,
            cursor=after,
        )

    show_listing(ctx, page, limit, cursor, jobs_table, wide_jobs_table, watch_s)


@jobs.command()
@job_argument
@api_command
def get(ctx: Ctx, job: str) -> None:
    """Show one job (JOB: id or TEAM/NAME)."""
    ctx.emit(ctx.client.get_job(job), job_view)


@jobs.command()
@job_argument
@click.option("-f", "--file", "path", metavar="FILE", help="The whole new definition (PUT).")
@click.option("--if-version", type=int, help="Only if the job is still at this version.")
@_spec_options
@api_command
def update(ctx: Ctx, job: str, path: str | None, if_version: int | None, **flags: Any) -> None:
    """Change a job. With -f the file replaces the whole definition; with flags only the fields
    given change.

    \b
    Examples:
      cronwheel jobs update data/nightly --schedule "0 4 * * *"
      cronwheel jobs update data/nightly -f nightly.yaml --if-version 3
    """
    changes = spec_from_flags(flags)
    if path:
        spec = {**_one_spec(path), **changes}
        updated = ctx.client.replace_job(job, spec, if_version=if_version)
    elif changes:
        updated = ctx.client.update_job(job, changes, if_version=if_version)
    else:
        raise click.UsageError("nothing to change: give -f FILE or flags such as --schedule")
    ctx.emit(updated, job_view)


@jobs.command()
@job_argument
@click.option("--if-version", type=int, help="Only if the job is still at this version.")
@api_command
def delete(ctx: Ctx, job: str, if_version: int | None) -> None:
    """Delete a job (its runs stay readable)."""
    job_id = ctx.client.get_job(job)["id"] if "/" in job else job  # the id is printed
    ctx.client.delete_job(job_id, if_version=if_version)
    ctx.emit({"deleted": job_id}, lambda data: f"deleted job {data['deleted']}")


@jobs.command()
@job_argument
@click.option("--note", help="Why (shown with the job).")
@api_command
def pause(ctx: Ctx, job: str, note: str | None) -> None:
    """Stop firing a job until it is resumed."""
    paused = ctx.client.pause_job(job, note)
    ctx.emit(paused, lambda data: f"paused {data['team']}/{data['name']} ({data['id']})")


@jobs.command()
@job_argument
@click.option(
    "--missed",
    type=click.Choice(["skip", "misfire"]),
    default="skip",
    show_default=True,
    help="Slots missed while paused: record them SKIPPED, or leave them to the misfire policy.",
)
@api_command
def resume(ctx: Ctx, job: str, missed: Literal["skip", "misfire"]) -> None:
    """Fire a paused job again."""
    resumed = ctx.client.resume_job(job, missed)
    ctx.emit(
        resumed,
        lambda data: f"resumed {data['team']}/{data['name']}; next run {when(data['next_run_at']) or '-'}",
    )


@jobs.command()
@job_argument
@click.option("--payload", help="JSON payload for this run (instead of the job's).")
@click.option("--idempotency-key", help="Retrying with the same key returns the same run.")
@click.option(
    "--traceparent",
    cls=EnvOption,
    envvar="TRACEPARENT",
    metavar="W3C",
    help="Make the run part of this trace (a server with --tracing on); as a CI's TRACEPARENT.",
)
@click.option(
    "--tracestate", cls=EnvOption, envvar="TRACESTATE", metavar="W3C", help="The trace's W3C tracestate."
)
@api_command
def trigger(
    ctx: Ctx,
    job: str,
    payload: str | None,
    idempotency_key: str | None,
    traceparent: str | None,
    tracestate: str | None,
) -> None:
    """Run a job now, once."""
    given = {} if payload is None else {"payload": parse_json(payload, "--payload")}
    triggered = ctx.client.trigger_job(
        job, **given, idempotency_key=idempotency_key, traceparent=traceparent, tracestate=tracestate
    )

    def summary(data: dict[str, Any]) -> str:
        verb = "triggered" if triggered.created else "already triggered"
        return f"{verb}: run {data['id']} {data['state']}"

    ctx.emit(triggered.run, summary)
