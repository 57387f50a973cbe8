"""``cronwheel schedule ...``: work with schedule expressions locally (no server needed)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import click

from cronwheel.clock import SystemClock
from cronwheel.schedule import Fire, FireKind, Schedule, ScheduleError, load_zone, parse_schedule
from cronwheel.schedule.lint import schedule_warnings

_NOTES = {
    FireKind.NORMAL: "",
    FireKind.SHIFTED: "shifted: {wall:%H:%M:%S} does not exist (DST gap)",
    FireKind.REPEATED_FIRST: "repeated hour, first pass",
    FireKind.REPEATED_SECOND: "repeated hour, second pass",
}


@click.group()
def schedule() -> None:
    """Check and preview schedule expressions."""


@schedule.command()
@click.argument("expression")
@click.option("--tz", "timezone", default="UTC", show_default=True, help="IANA time zone.")
@click.option("--count", "-n", default=10, show_default=True, type=click.IntRange(1, 10_000))
@click.option("--after", help="ISO 8601 instant to start after (naive = in --tz). Default: now.")
@click.option("--seed", help="What H hashes (cronwheel jobs use their job id).")
@click.option("--dst-gap", type=click.Choice(["shift", "skip"]), help="Skipped local times.")
@click.option("--dst-fold", type=click.Choice(["first", "last", "both"]), help="Repeated local times.")
@click.option("--json", "as_json", is_flag=True, help="Machine-readable output.")
def preview(
    expression: str,
    timezone: str,
    count: int,
    after: str | None,
    seed: str | None,
    dst_gap: Any,
    dst_fold: Any,
    as_json: bool,
) -> None:
    """Print the next fire times of EXPRESSION, with DST effects and warnings.

    \b
    Examples:
      cronwheel schedule preview "*/15 9-17 * * MON-FRI" --tz Europe/Berlin
      cronwheel schedule preview "30 2 * * *" --tz America/New_York --after 2026-03-07
    """
    try:
        parsed = parse_schedule(expression, timezone, dst_gap=dst_gap, dst_fold=dst_fold, seed=seed)
        start = _start(after, timezone)
    except ScheduleError as error:
        raise click.UsageError(str(error)) from None
    fires = [fire for _, fire in zip(range(count), parsed.fires_after(start), strict=False)]
    warnings = schedule_warnings(parsed, start)
    if as_json:
        click.echo(json.dumps(_as_json(parsed, start, fires, warnings), indent=2))
    else:
        _print_table(parsed, start, fires, warnings)


def _start(after: str | None, timezone: str) -> datetime:
    if after is None:
        return SystemClock().now()
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


def _policy(parsed: Schedule) -> str:
    kind = "wildcard (* minute or hour)" if parsed.wildcard else "fixed-time"
    return f"{kind}; DST gap: {parsed.dst_gap}, repeated time: {parsed.dst_fold}"


def _print_table(parsed: Schedule, start: datetime, fires: list[Fire], warnings: list[str]) -> None:
    click.echo(f"{parsed.expression}  in {parsed.timezone}  ({_policy(parsed)})")
    click.echo(f"next {len(fires)} after {start.isoformat()}:")
    for fire in fires:
        at = fire.at
        utc = at.astimezone(UTC)
        note = _NOTES[fire.kind].format(wall=fire.wall)
        line = f"  {at:%Y-%m-%d %H:%M:%S %a}  {_offset(at)}  {utc:%Y-%m-%dT%H:%M:%SZ}  {note}"
        click.echo(line.rstrip())
    if not fires:
        click.echo("  (no fire times)")
    for warning in warnings:
        click.secho(f"warning: {warning}", fg="yellow", err=True)


def _offset(at: datetime) -> str:
    return at.isoformat()[-6:] if at.utcoffset() else "+00:00"


def _as_json(parsed: Schedule, start: datetime, fires: list[Fire], warnings: list[str]) -> dict[str, Any]:
    return {
        "expression": parsed.expression,
        "timezone": parsed.timezone,
        "dst_gap": parsed.dst_gap,
        "dst_fold": parsed.dst_fold,
        "after": start.isoformat(),
        "fires": [
            {
                "at": fire.at.isoformat(),
                "utc": fire.at.astimezone(UTC).isoformat().replace("+00:00", "Z"),
                "offset": _offset(fire.at),
                "kind": fire.kind.value,
                "wall": fire.wall.isoformat(),
            }
            for fire in fires
        ],
        "warnings": warnings,
    }
