"""Taking a bounded number of items from a listing, as the CLI's ``--limit``/``--cursor`` do."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from cronwheel.client.types import Page

T = TypeVar("T")


def collect(
    fetch: Callable[[int, str | None], Page[T]], limit: int, cursor: str | None = None
) -> tuple[list[T], str | None]:
    """Up to ``limit`` items from ``fetch(page_size, cursor)`` (for instance
    ``lambda n, c: client.list_jobs(team="data", limit=n, cursor=c)``), following the cursors,
    and the cursor to go on from (None: nothing is left)."""
    items: list[T] = []
    while len(items) < limit:
        page = fetch(min(limit - len(items), 1000), cursor)
        items += page.items
        cursor = page.next_cursor
        if cursor is None:
            break
    return items, cursor
