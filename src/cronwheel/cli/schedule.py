"""``cronwheel schedule ...``: work with schedule expressions locally (no server needed).

``schedule preview`` builds its answer with the API's own builder and model
(:meth:`cronwheel.api.schemas.jobs.PreviewOut.build`), so ``-o json`` prints exactly what
``POST /v1/schedules/preview`` answers for the same input, and the table is drawn from that
same data.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import click

from cronwheel.cli import global_options as shared
from cronwheel.cli.output import SECONDS, emit, output_option
from cronwheel.clock import SystemClock
from cronwheel.schedule import ScheduleError, load_zone

_NOTES = {
    "normal": "",
    "shifted": "shifted: {wall:%H:%M:%S} does not exist (DST gap)",
    "repeated-first": "repeated hour, first pass",
    "repeated-second": "repeated hour, second pass",
}
_OPTIONS = {
    "expression": "EXPRESSION",
    "timezone": "--tz",
    "count": "--count",
    "seed": "--seed",
    "jitter_s": "--jitter",
}


@shared.group(shared.OUTPUT)
def schedule(**_: Any) -> None:
    """Check and preview schedule expressions."""


@schedule.command()
@click.argument("expression")
@click.option("--tz", "timezone", default="UTC", show_default=True, help="IANA time zone.")
@click.option("--count", "-n", default=10, show_default=True, type=click.IntRange(1, 1000))
@click.option("--after", help="ISO 8601 instant to start after (naive = in --tz). Default: now.")
@click.option("--seed", help="What H hashes (cronwheel jobs use their job id).")
@click.option(
    "--jitter",
    "jitter_s",
    type=SECONDS,
    default=0.0,
    help="A job's jitter window (30s, 1.5, 2m): with --seed (the job id), when each slot fires.",
)
@click.option("--dst-gap", type=click.Choice(["shift", "skip"]), help="Skipped local times.")
@click.option("--dst-fold", type=click.Choice(["first", "last", "both"]), help="Repeated local times.")
@output_option
@click.option("--json", "as_json", is_flag=True, hidden=True, help="Deprecated spelling of -o json.")
def preview(
    expression: str,
    timezone: str,
    count: int,
    after: str | None,
    seed: str | None,
    jitter_s: float,
    dst_gap: str | None,
    dst_fold: str | None,
    output: str,
    as_json: bool,
) -> None:
    """Print the next fire times of EXPRESSION, with DST effects and warnings.

    Runs locally: no server is needed. `-o json` prints what POST /v1/schedules/preview answers.

    \b
    Examples:
      cronwheel schedule preview "*/15 9-17 * * MON-FRI" --tz Europe/Berlin
      cronwheel schedule preview "30 2 * * *" --tz America/New_York --after 2026-03-07
      cronwheel schedule preview "@daily" -n 3 -o json
    """
    output = _output(output, as_json)
    request = {
        "expression": expression,
        "timezone": timezone,
        "count": count,
        "dst_gap": dst_gap,
        "dst_fold": dst_fold,
        "seed": seed,
        "jitter_s": jitter_s,
    }
    data = _build(request, after)
    emit(data, output, preview_table)
    if output == "table":
        for warning in data["warnings"]:
            click.secho(f"warning: {warning}", fg="yellow", err=True)


def _output(output: str, as_json: bool) -> str:
    """``--json`` is kept, hidden, as the old spelling of ``-o json`` (with a note on stderr)."""
    if not as_json:
        return output
    if output == "yaml":
        raise click.UsageError("--json and -o yaml contradict each other (--json is the old -o json)")
    click.echo("note: --json is deprecated; use -o json", err=True)
    return "json"


def _build(request: dict[str, Any], after: str | None) -> dict[str, Any]:
    """The preview as the API's JSON, or a usage error (exit 2) naming what is wrong."""
    # imported here, not at the top: pydantic costs every other command start-up time
    from pydantic import ValidationError  # noqa: PLC0415

    from cronwheel.api.schemas.preview import PreviewIn, PreviewOut  # noqa: PLC0415

    try:
        body = PreviewIn.model_validate({**request, "after": _start(after, request["timezone"])})
        built = PreviewOut.build(body, SystemClock().now())
    except ScheduleError as error:
        raise click.UsageError(str(error)) from None
    except ValidationError as error:
        problems = [
            f"{_OPTIONS.get(str(detail['loc'][0]), detail['loc'][0])}: {detail['msg']}"
            for detail in error.errors()
        ]
        raise click.UsageError("; ".join(problems)) from None
    data: dict[str, Any] = built.model_dump(mode="json")
    return data


def _start(after: str | None, timezone: str) -> datetime | None:
    """``--after`` as an aware instant: a date or a naive time is read in the schedule's zone."""
    if after is None:
        return None
    try:
        moment = datetime.fromisoformat(after)
    except ValueError:
        raise click.BadParameter(
            f"{after!r} is not an ISO 8601 date or date-time (e.g. 2026-03-07T12:00:00+01:00)",
            param_hint="--after",
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=load_zone(timezone))
    return moment


def preview_table(data: dict[str, Any]) -> str:
    """The preview's JSON as lines: local time, weekday, offset, UTC, and what DST did."""
    after = datetime.fromisoformat(data["after"]).astimezone(load_zone(data["timezone"]))
    lines = [
        f"{data['expression']}  in {data['timezone']}  ({_policy(data)})",
        data["description"],
        f"next {len(data['fires'])} after {after.isoformat()}:",
    ]
    lines += [fire_line(fire) for fire in data["fires"]]
    if not data["fires"]:
        lines.append("  (no fire times)")
    return "\n".join(lines)


def fire_line(fire: dict[str, Any]) -> str:
    """One fire time of a preview: local time, weekday, offset, UTC, when jitter fires it, and
    what DST did."""
    at = datetime.fromisoformat(fire["at"])
    note = _NOTES[fire["kind"]].format(wall=datetime.fromisoformat(fire["wall"]))
    fires = f"fires {fire['fires_at']}  " if fire.get("fires_at") else ""
    return f"  {at:%Y-%m-%d %H:%M:%S %a}  {_offset(at)}  {fire['utc']}  {fires}{note}".rstrip()


def _policy(data: dict[str, Any]) -> str:
    kind = "wildcard (* minute or hour)" if data["wildcard"] else "fixed-time"
    return f"{kind}; DST gap: {data['dst_gap']}, repeated time: {data['dst_fold']}"


def _offset(at: datetime) -> str:
    return at.isoformat()[-6:] if at.utcoffset() else "+00:00"
