"""``--watch`` for the list commands: ask the API again every ``--interval`` and print the
listing only when it differs from the one printed last, until Ctrl-C (exit 0). On a terminal
each listing replaces the last on the screen; into a pipe or file they follow each other,
separated by a blank line."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any

import click

from cronwheel.cli.output import SECONDS, Ctx, render
from cronwheel.client import collect
from cronwheel.client.types import Page

DEFAULT_INTERVAL_S = 2.0
CLEAR = "\x1b[H\x1b[2J"  # cursor home, erase the screen

pause: Callable[[float], None] = time.sleep
"""How the loop waits between two requests (the one place it meets time)."""


def watch_options(func: Callable[..., Any]) -> Callable[..., Any]:
    """``-w/--watch`` and ``--interval``, given to the command as ``watching`` and ``interval``
    (read them with :func:`every`)."""
    watching = click.option(
        "-w", "--watch", "watching", is_flag=True, help="Print the listing again when it changes."
    )
    interval = click.option(
        "--interval",
        type=SECONDS,
        metavar="SPAN",
        help=f"With --watch: how often to ask the API (2s, 500ms ...; default {DEFAULT_INTERVAL_S:g}s).",
    )
    return watching(interval(func))


def every(watching: bool, interval: float | None) -> float | None:
    """The seconds between two requests of a watch (None: no watch), or a usage error."""
    if interval is not None and not watching:
        raise click.UsageError("--interval goes with --watch")
    if interval is not None and interval <= 0:
        raise click.BadParameter("must be more than 0 seconds", param_hint="--interval")
    return (interval or DEFAULT_INTERVAL_S) if watching else None


def frame(text: str, *, first: bool, terminal: bool) -> str:
    """What to print for a listing that changed: on a terminal it replaces the screen."""
    if terminal:
        return CLEAR + text
    return text if first else "\n" + text


def watch(listing: Callable[[], str], interval_s: float) -> None:
    """Print ``listing()`` now, then each time it differs from the last printed, asking every
    ``interval_s`` seconds, until Ctrl-C."""
    shown: str | None = None
    terminal = sys.stdout.isatty()
    try:
        while True:
            text = listing()
            if text != shown:
                click.echo(frame(text, first=shown is None, terminal=terminal))
                shown = text
            pause(interval_s)
    except KeyboardInterrupt:
        return


def show_listing(
    ctx: Ctx,
    page: Callable[[int, str | None], Page[Any]],
    limit: int,
    cursor: str | None,
    table: Callable[[list[Any]], str],
    wide: Callable[[list[Any]], str],
    watch_s: float | None,
) -> None:
    """Print up to ``limit`` items of a list command from ``cursor`` on, read a page at a time by
    ``page(size, after)``, as ``{"items": ..., "next_cursor": ...}``; or watch them."""

    def fetch() -> dict[str, Any]:
        items, after = collect(page, limit, cursor)
        return {"items": items, "next_cursor": after}

    def rows(draw: Callable[[list[Any]], str]) -> Callable[[dict[str, Any]], str]:
        return lambda data: draw(data["items"])

    if watch_s is not None:
        watch(lambda: render(fetch(), ctx.output, rows(table), rows(wide)), watch_s)
        return
    data = fetch()
    ctx.emit(data, rows(table), rows(wide))
    if data["next_cursor"] and ctx.tabular:
        click.echo(f"(more: --cursor {data['next_cursor']})", err=True)
