"""``cronwheel tokens ...``: make, list and revoke API tokens over the API, and make a server's
first admin token straight in its database (``create --bootstrap``)."""

from __future__ import annotations

import asyncio
import re
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

import click

from cronwheel.cli import global_options as shared
from cronwheel.cli.options import database_url_option
from cronwheel.cli.output import Ctx, api_command, fields, table, when
from cronwheel.client import collect
from cronwheel.errors import CronwheelError
from cronwheel.redaction import redact_url

SCOPES = ("read", "write", "trigger", "admin")
_DURATION = re.compile(r"^(\d+)([smhdw])$")
_UNITS = {"s": "seconds", "m": "minutes", "h": "hours", "d": "days", "w": "weeks"}


@shared.group(*shared.GLOBAL)
def tokens(**_: Any) -> None:
    """API tokens: make, list and revoke them (admin tokens only).

    \b
    Examples:
      cronwheel tokens create --name ci --team data --scope read --scope trigger --expires-in 90d
      cronwheel tokens create --bootstrap --database-url postgresql://cron@db/cron
      cronwheel tokens revoke 3f9a0c1b2d4e
    """


def expiry(expires_in: str | None, expires_at: str | None, now: datetime) -> str | None:
    """The RFC 3339 expiry of ``--expires-in 90d`` or ``--expires-at ...`` (not both)."""
    if expires_in and expires_at:
        raise click.UsageError("give --expires-in or --expires-at, not both")
    if expires_at:
        return expires_at
    if not expires_in:
        return None
    match = _DURATION.match(expires_in.strip())
    if match is None or int(match.group(1)) == 0:
        raise click.BadParameter("a duration such as 30m, 12h, 90d or 4w", param_hint="--expires-in")
    delta = timedelta(**{_UNITS[match.group(2)]: int(match.group(1))})
    return (now + delta).isoformat().replace("+00:00", "Z")


def token_view(token: dict[str, Any]) -> str:
    view = fields(
        [
            ("id", token["id"]),
            ("name", token["name"]),
            ("team", token["team"] or "(every team)"),
            ("scopes", token["scopes"]),
            ("state", token["state"]),
            ("created", when(token["created_at"])),
            ("expires", when(token["expires_at"]) or "never"),
            ("last used", when(token["last_used_at"])),
            ("revoked", when(token["revoked_at"])),
        ]
    )
    if "token" in token:
        view += f"\n\n{token['token']}\n\n(shown once: it cannot be read again)"
    return view


@tokens.command("create")
@click.option("--name", help="What the token is for.")
@click.option("--team", help="The token's team.")
@click.option(
    "--all-teams", is_flag=True, help="A token of every team (only an admin of every team may make one)."
)
@click.option("--scope", "scopes", multiple=True, type=click.Choice(SCOPES), help="Repeatable.")
@click.option("--expires-in", metavar="DURATION", help="30m, 12h, 90d, 4w ... (default: never).")
@click.option("--expires-at", metavar="RFC3339", help="An instant with an offset, 2026-12-31T00:00:00Z.")
@click.option(
    "--bootstrap",
    is_flag=True,
    help="Make an admin token of every team straight in the database (no server needed): a "
    "cluster's first token.",
)
@database_url_option("With --bootstrap: the store.")
@click.option(
    "-q",
    "--quiet",
    is_flag=True,
    help="Print only the token (for a script: TOKEN=$(cronwheel tokens create -q ...)).",
)
@api_command
def create(
    ctx: Ctx,
    name: str | None,
    team: str | None,
    all_teams: bool,
    scopes: tuple[str, ...],
    expires_in: str | None,
    expires_at: str | None,
    bootstrap: bool,
    database_url: str,
    quiet: bool,
) -> None:
    """Make a token; it is printed once."""
    if quiet and not ctx.tabular:
        raise click.UsageError(f"-q prints the token alone: it does not go with -o {ctx.output}")
    if bootstrap:
        if team or all_teams or scopes or expires_in or expires_at:
            raise click.UsageError(
                "--bootstrap makes an admin token of every team: no --team, --scope or expiry"
            )
        _bootstrap(database_url, name or "bootstrap admin", quiet)
        return
    if not name:
        raise click.UsageError("--name is required")
    if bool(team) == all_teams:
        raise click.UsageError("give --team TEAM or --all-teams")
    if not scopes:
        raise click.UsageError("give at least one --scope (read, write, trigger, admin)")
    expires = expiry(expires_in, expires_at, datetime.now(UTC))
    made = ctx.client.create_token(name, team=team, scopes=list(dict.fromkeys(scopes)), expires_at=expires)
    if quiet:
        click.echo(made["token"])
        return
    ctx.emit(made, token_view)


def _bootstrap(database_url: str, name: str, quiet: bool) -> None:
    from cronwheel.node import admin_token  # noqa: PLC0415 - imported late: other commands stay quick to start
    from cronwheel.node.backends import connect_store  # noqa: PLC0415

    async def make() -> str:
        store = await connect_store(database_url)
        try:
            return await admin_token.issue_admin(store, datetime.now(UTC), name)
        finally:
            await store.close()

    try:
        text = asyncio.run(make())
    except CronwheelError as error:
        click.echo(f"error: {error}", err=True)
        sys.exit(2)
    if not quiet:
        click.echo(f"admin token of every team {name!r} stored in {redact_url(database_url)}:", err=True)
    click.echo(text)
    if not quiet:
        click.echo(
            "(shown once: keep it in a secret store, and revoke it once you have made others)", err=True
        )


@tokens.command("list")
@click.option("--team", help="Only this team's tokens.")
@click.option("--all", "include_revoked", is_flag=True, help="Revoked tokens too.")
@click.option("--limit", type=click.IntRange(1, 100_000), default=100, show_default=True)
@click.option("--cursor", help="Continue from a cursor a previous list printed.")
@api_command
def list_(ctx: Ctx, team: str | None, include_revoked: bool, limit: int, cursor: str | None) -> None:
    """List tokens (never the tokens themselves: only their ids)."""
    items, cursor = collect(
        lambda size, after: ctx.client.list_tokens(
            team=team, include_revoked=include_revoked, limit=size, cursor=after
        ),
        limit,
        cursor,
    )
    ctx.emit({"items": items, "next_cursor": cursor}, lambda data: tokens_table(data["items"]))
    if cursor and ctx.output == "table":
        click.echo(f"(more: --cursor {cursor})", err=True)


def tokens_table(items: list[dict[str, Any]]) -> str:
    if not items:
        return "no tokens"
    return table(
        ["ID", "NAME", "TEAM", "SCOPES", "STATE", "EXPIRES", "LAST USED"],
        [
            [t["id"], t["name"], t["team"] or "*", ",".join(t["scopes"]), t["state"],
             when(t["expires_at"]) or "never", when(t["last_used_at"])]
            for t in items
        ],
    )  # fmt: skip


@tokens.command()
@click.argument("token_id")
@api_command
def revoke(ctx: Ctx, token_id: str) -> None:
    """Revoke a token (by its id): every request made with it is refused from now on."""
    ctx.client.revoke_token(token_id)
    if ctx.output == "table":
        click.echo(f"revoked {token_id}")
    else:
        ctx.emit({"id": token_id, "state": "revoked"}, str)
