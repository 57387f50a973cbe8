"""``cronwheel calendars ...``: a team's calendars of closed days, over the API.

A calendar is named ``TEAM/NAME``. ``create`` and ``update`` take its days from flags, from a
file (``-f calendar.yaml``: ``dates``, ``ranges`` of ``{from, to}``, ``weekdays``, ``holidays`` of
``{country, subdivision}``, ``description``), or both (the flags add to the file's lists). Jobs
list calendars by name (``cronwheel jobs create --calendar NAME``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click
import yaml

from cronwheel.cli import global_options as shared
from cronwheel.cli.output import Ctx, api_command, table, when
from cronwheel.client import NotFound, collect
from cronwheel.schedule.calendar import WEEKDAYS

FIELDS = ("name", "description", "dates", "ranges", "weekdays", "holidays")  # a calendar's definition


def calendar_definition(calendar: dict[str, Any]) -> dict[str, Any]:
    """What a client defines of a calendar the API returned (what export writes, apply compares)."""
    return {key: calendar[key] for key in FIELDS}


@dataclass
class CalendarPlan:
    """The calendars of an apply file to create, and those to replace (team, name, body)."""

    create: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)
    update: list[tuple[str, str, dict[str, Any]]] = field(default_factory=list)

    def text(self) -> list[str]:
        return [f"+ create calendar {team}/{name}" for team, name, _ in self.create] + [
            f"~ update calendar {team}/{name}" for team, name, _ in self.update
        ]

    def data(self) -> dict[str, Any]:
        """The plan's JSON keys (none when the file holds no calendar to change)."""
        if not (self.create or self.update):
            return {}
        return {
            "create_calendars": [f"{team}/{name}" for team, name, _ in self.create],
            "update_calendars": [f"{team}/{name}" for team, name, _ in self.update],
        }


def plan_calendars(ctx: Ctx, entries: list[tuple[str, Any]], path: str) -> CalendarPlan:
    """Which of a file's calendars the server lacks or holds otherwise (compared as the server
    would store them: its own answer to the current one, the file's as given, defaults filled)."""
    plan = CalendarPlan()
    for team, raw in entries:
        if not isinstance(raw, dict) or not isinstance(raw.get("name"), str):
            raise click.ClickException(f"{path}: each calendar of team {team} needs a name")
        unknown = set(raw) - set(FIELDS)
        if unknown:
            raise click.ClickException(
                f"{path}: calendar {raw['name']!r}: unknown key(s) {', '.join(sorted(unknown))}"
            )
        body = {key: raw[key] for key in FIELDS[1:] if raw.get(key) is not None}
        try:
            current = calendar_definition(dict(ctx.client.get_calendar(team, raw["name"])))
        except NotFound:
            plan.create.append((team, raw["name"], body))
            continue
        wanted = {"description": "", "dates": [], "ranges": [], "weekdays": [], "holidays": None, **body}
        if any(current[key] != wanted[key] for key in FIELDS[1:]):
            plan.update.append((team, raw["name"], body))
    return plan


def write_calendars(ctx: Ctx, plan: CalendarPlan) -> None:
    for team, name, body in plan.create:
        ctx.client.create_calendar(team, {**body, "name": name})
    for team, name, body in plan.update:
        ctx.client.replace_calendar(team, name, body)


def _split(ref: str) -> tuple[str, str]:
    team, sep, name = ref.partition("/")
    if not sep or not team or not name:
        raise click.BadParameter(f"expected TEAM/NAME, not {ref!r}")
    return team, name


def _from_file(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        data = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as error:
        raise click.BadParameter(f"cannot read {path}: {error}", param_hint="-f") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise click.BadParameter(f"{path} holds no mapping of calendar fields", param_hint="-f")
    return {key: [str(v) for v in value] if key == "dates" else value for key, value in data.items()}


def _range(text: str) -> dict[str, str]:
    start, sep, end = text.partition("..")
    if not sep:
        raise click.BadParameter(f"expected FROM..TO (ISO dates), not {text!r}", param_hint="--range")
    return {"from": start, "to": end}


def _holidays(text: str) -> dict[str, str]:
    country, _, subdivision = text.partition("-")
    return {"country": country, **({"subdivision": subdivision} if subdivision else {})}


def calendar_body(flags: dict[str, Any]) -> dict[str, Any]:
    """A calendar's fields from ``-f`` and the flags (the flags' lists added to the file's)."""
    body = _from_file(flags.get("file"))
    for key, values in (
        ("dates", list(flags.get("dates") or ())),
        ("ranges", [_range(text) for text in flags.get("ranges") or ()]),
        ("weekdays", list(flags.get("weekdays") or ())),
    ):
        if values:
            body[key] = [*body.get(key, []), *values]
    if flags.get("holidays"):
        body["holidays"] = _holidays(flags["holidays"])
    if flags.get("description") is not None:
        body["description"] = flags["description"]
    return body


def _summary(calendar: dict[str, Any]) -> str:
    parts = [
        f"{len(calendar['dates'])} date(s)" if calendar["dates"] else "",
        f"{len(calendar['ranges'])} range(s)" if calendar["ranges"] else "",
        ",".join(calendar["weekdays"]),
        _holidays_text(calendar["holidays"]),
    ]
    return "; ".join(part for part in parts if part) or "nothing closed"


def _holidays_text(holidays: dict[str, Any] | None) -> str:
    if not holidays:
        return ""
    subdivision = holidays.get("subdivision")
    return f"holidays {holidays['country']}" + (f"-{subdivision}" if subdivision else "")


def calendar_view(calendar: dict[str, Any]) -> str:
    ranges = [f"{r['from']}..{r['to']}" for r in calendar["ranges"]]
    rows = [
        ("team/name", f"{calendar['team']}/{calendar['name']}"),
        ("version", calendar["version"]),
        ("description", calendar["description"] or None),
        ("dates", ", ".join(calendar["dates"]) or None),
        ("ranges", ", ".join(ranges) or None),
        ("weekdays", ", ".join(calendar["weekdays"]) or None),
        ("holidays", _holidays_text(calendar["holidays"]) or None),
        ("updated", when(calendar["updated_at"])),
    ]
    return "\n".join(f"{key:<12} {value}" for key, value in rows if value is not None)


def _options(func: Any) -> Any:
    options = [
        click.option("-f", "--file", type=click.Path(dir_okay=False, path_type=Path), help="A YAML file."),
        click.option("--date", "dates", multiple=True, metavar="YYYY-MM-DD", help="A closed day (repeat)."),
        click.option(
            "--range",
            "ranges",
            multiple=True,
            metavar="FROM..TO",
            help="Closed days, both included (repeat).",
        ),
        click.option(
            "--weekday",
            "weekdays",
            multiple=True,
            type=click.Choice(WEEKDAYS),
            help="A closed weekday (repeat).",
        ),
        click.option("--holidays", metavar="CC[-SUB]", help="A country's public holidays (DE-BY, US)."),
        click.option("--description"),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@shared.group(*shared.GLOBAL)
def calendars(**_: Any) -> None:
    """A team's calendars of closed days, which jobs skip (or shift their runs away from).

    \b
    Examples:
      cronwheel calendars create data/closed --weekday sat --weekday sun --holidays DE-BY
      cronwheel calendars create data/freeze -f freeze.yaml
      cronwheel jobs create ... --calendar closed --calendar-shift previous
    """


@calendars.command()
@click.argument("ref", metavar="TEAM/NAME")
@_options
@api_command
def create(ctx: Ctx, ref: str, **flags: Any) -> None:
    """Create a calendar."""
    team, name = _split(ref)
    created = ctx.client.create_calendar(team, {**calendar_body(flags), "name": name})
    ctx.emit(created, lambda data: f"created calendar {data['team']}/{data['name']}: {_summary(data)}")


@calendars.command()
@click.argument("ref", metavar="TEAM/NAME")
@_options
@api_command
def update(ctx: Ctx, ref: str, **flags: Any) -> None:
    """Replace a calendar's days (every job listing it follows at once)."""
    team, name = _split(ref)
    updated = ctx.client.replace_calendar(team, name, calendar_body(flags))
    ctx.emit(updated, lambda data: f"updated calendar {data['team']}/{data['name']}: {_summary(data)}")


@calendars.command()
@click.argument("ref", metavar="TEAM/NAME")
@api_command
def get(ctx: Ctx, ref: str) -> None:
    """Show a calendar."""
    team, name = _split(ref)
    ctx.emit(ctx.client.get_calendar(team, name), calendar_view)


@calendars.command("list")
@click.argument("team")
@click.option("--limit", type=click.IntRange(1, 100_000), default=1000, show_default=True)
@api_command
def list_(ctx: Ctx, team: str, limit: int) -> None:
    """List a team's calendars."""
    items, cursor = collect(
        lambda size, after: ctx.client.list_calendars(team, limit=size, cursor=after), limit
    )

    def shown(data: dict[str, Any]) -> str:
        if not data["items"]:
            return "no calendars"
        rows = [[c["name"], _summary(c), when(c["updated_at"])] for c in data["items"]]
        return table(["NAME", "CLOSED", "UPDATED"], rows)

    ctx.emit({"items": items, "next_cursor": cursor}, shown)


@calendars.command()
@click.argument("ref", metavar="TEAM/NAME")
@api_command
def delete(ctx: Ctx, ref: str) -> None:
    """Delete a calendar no job lists."""
    team, name = _split(ref)
    ctx.client.delete_calendar(team, name)
    ctx.emit({"deleted": f"{team}/{name}"}, lambda data: f"deleted calendar {data['deleted']}")
