"""``cronwheel audit ...``: read the audit log over the API (admin tokens), and prune it in the
database (the operator's retention: the API cannot delete an entry)."""

from __future__ import annotations

import asyncio
import re
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from cronwheel.cli import global_options as shared
from cronwheel.cli.options import database_url_option
from cronwheel.cli.output import Ctx, api_command, table, when
from cronwheel.client import collect
from cronwheel.errors import CronwheelError

_AGO = re.compile(r"^(\d+)([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


@shared.group(*shared.GLOBAL)
def audit(**_: Any) -> None:
    """The audit log: who changed what, and which requests were refused (admin tokens only).

    \b
    Examples:
      cronwheel audit list --team data --since 24h
      cronwheel audit list --action job --target nightly -o json
      cronwheel audit list --action auth --since 2026-12-01T00:00:00Z
      cronwheel audit prune --older-than 365d --database-url postgresql://cron@db/cron
    """


def _delta(text: str) -> timedelta | None:
    match = _AGO.match(text.strip())
    if match is None or int(match.group(1)) == 0:
        return None
    return timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})


def instant(value: str | None, option: str, now: datetime) -> str | None:
    """``--since 24h`` (that long before ``now``) or an RFC 3339 instant, as RFC 3339 text."""
    if value is None:
        return None
    delta = _delta(value)
    if delta is not None:
        return (now - delta).isoformat().replace("+00:00", "Z")
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        parsed = None
    if parsed is None or parsed.tzinfo is None:
        raise click.BadParameter(
            "a duration before now (30m, 24h, 7d, 4w) or an instant with an offset (2026-12-01T00:00:00Z)",
            param_hint=option,
        )
    return value


def actor_of(entry: dict[str, Any]) -> str:
    if entry["actor_kind"] == "anonymous":
        return "(anonymous)"
    name, actor_id = entry["actor_name"] or entry["actor_id"], entry["actor_id"]
    return f"{name} ({actor_id})" if actor_id is not None and name != actor_id else str(name)


def target_of(entry: dict[str, Any]) -> str | None:
    if entry["target_kind"] is None:
        return None
    shown = entry["target_name"] or entry["target_id"]
    return f"{entry['target_kind']} {shown}" if shown else str(entry["target_kind"])


def audit_table(items: list[dict[str, Any]]) -> str:
    if not items:
        return "no entries"
    return table(
        ["AT", "TEAM", "ACTION", "ACTOR", "TARGET", "OUTCOME", "CLIENT"],
        [
            [when(e["at"]), e["team"] or "*", e["action"], actor_of(e), target_of(e),
             e["outcome"] if e["status"] is None else f"{e['outcome']} ({e['status']})", e["client"]]
            for e in items
        ],
    )  # fmt: skip


@audit.command("list")
@click.option("--team", help="Only this team's entries.")
@click.option("--action", help="An action (job.update) or a family (job, token, secret, auth).")
@click.option("--actor", help="Only this actor's entries (a token id or an OIDC subject).")
@click.option("--target", help="Only entries on this target (its id or name).")
@click.option("--since", metavar="WHEN", help="At or after: a duration before now (24h, 7d) or RFC 3339.")
@click.option("--until", metavar="WHEN", help="Before: a duration before now or RFC 3339.")
@click.option("--limit", type=click.IntRange(1, 100_000), default=50, show_default=True)
@click.option("--cursor", help="Continue from a cursor a previous list printed.")
@api_command
def list_(
    ctx: Ctx,
    team: str | None,
    action: str | None,
    actor: str | None,
    target: str | None,
    since: str | None,
    until: str | None,
    limit: int,
    cursor: str | None,
) -> None:
    """List audit entries, newest first (``-o json`` shows each one's before and after)."""
    now = datetime.now(UTC)
    after, before = instant(since, "--since", now), instant(until, "--until", now)
    items, cursor = collect(
        lambda size, page: ctx.client.list_audit(
            team=team,
            action=action,
            actor=actor,
            target=target,
            since=after,
            until=before,
            limit=size,
            cursor=page,
        ),
        limit,
        cursor,
    )
    ctx.emit({"items": items, "next_cursor": cursor}, lambda data: audit_table(data["items"]))
    if cursor and ctx.output == "table":
        click.echo(f"(more: --cursor {cursor})", err=True)


@audit.command()
@click.option(
    "--older-than", required=True, metavar="DURATION", help="Delete entries older than this (365d)."
)
@database_url_option("The store (pruning is the operator's: it goes to the database, not the API).")
def prune(older_than: str, database_url: str) -> None:
    """Delete audit entries older than DURATION, straight in the database (retention)."""
    delta = _delta(older_than)
    if delta is None:
        raise click.BadParameter("a duration such as 90d, 52w or 8760h", param_hint="--older-than")
    from cronwheel.node.backends import connect_store  # noqa: PLC0415 - late: other commands start quickly

    before = datetime.now(UTC) - delta

    async def run() -> int:
        store = await connect_store(database_url)
        try:
            return await store.prune_audit(before)
        finally:
            await store.close()

    try:
        deleted = asyncio.run(run())
    except CronwheelError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(2)
    click.echo(f"deleted {deleted} audit entries from before {before.isoformat().replace('+00:00', 'Z')}")
