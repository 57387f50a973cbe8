"""Text that both stores can hold: every string a client sends is checked here, once, at the
API's boundary (REST and gRPC alike), before any model, check or store sees it.

PostgreSQL's ``text`` and ``jsonb`` refuse U+0000, and no UTF-8 store holds a lone surrogate
(U+D800 to U+DFFF: JSON's ``"\\ud800"`` parses to one in Python, which has no UTF-8 bytes).
SQLite would store the first and fail on the second. So a value that one store would take and
the other refuse is refused by both, whichever the server runs on: a job is accepted or refused
alike on SQLite and PostgreSQL. Every other code point is stored as sent.

:func:`unstorable_path` finds the first string that breaks the rule in a decoded JSON value (keys
included) and says where it is; :func:`unstorable_entries` turns the body, the query and the path
of a request into problem entries that name the field and never repeat the value.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from fastapi import Request

from cronwheel.api.problems import ProblemError, field_error

_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")

REASON = "contains a character no store can hold (U+0000, or a lone surrogate U+D800 to U+DFFF)"
KEY_REASON = "has a key that contains a character no store can hold (U+0000, or a lone surrogate)"
CODE = "unstorable_text"

Path = tuple[str | int, ...]


def storable(text: str) -> bool:
    """Whether ``text`` can be stored as it is by every store."""
    return _UNSTORABLE.search(text) is None


def unstorable_path(value: Any, path: Path = ()) -> tuple[Path, bool] | None:
    """Where the first unstorable string of ``value`` (decoded JSON) is, and whether it is a key
    (then the path names the object that holds it), or None when every string is storable."""
    if isinstance(value, str):
        return None if storable(value) else (path, False)
    if isinstance(value, dict):
        for key, item in value.items():
            if isinstance(key, str) and not storable(key):
                return path, True
            found = unstorable_path(item, (*path, key))
            if found is not None:
                return found
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found = unstorable_path(item, (*path, index))
            if found is not None:
                return found
    return None


def entry(location: str, path: Path, is_key: bool) -> dict[str, Any]:
    """The problem entry for an unstorable value at ``path`` (dotted, as every entry names fields)."""
    field = ".".join(str(part) for part in path)
    return field_error(field, KEY_REASON if is_key else REASON, location, code=CODE)


def unstorable_entries(
    body: Any, query: Iterable[tuple[str, str]], path_params: dict[str, Any]
) -> list[dict[str, Any]]:
    """One entry per refused place of a request: its body, each query parameter, each path
    parameter (a repeated query parameter is named once)."""
    entries: list[dict[str, Any]] = []
    found = unstorable_path(body)
    if found is not None:
        entries.append(entry("body", *found))
    names = dict.fromkeys(name for name, value in query if not (storable(name) and storable(value)))
    entries += [entry("query", (name if storable(name) else "",), False) for name in names]
    entries += [
        entry("path", (name,), False)
        for name, value in path_params.items()
        if isinstance(value, str) and not storable(value)
    ]
    return entries


def refusal(entries: list[dict[str, Any]]) -> ProblemError:
    """The 422 for ``entries`` (each names its field; no value is repeated)."""
    fields = ", ".join(dict.fromkeys(item["field"] or item["location"] for item in entries))
    detail = f"{fields}: {entries[0]['message']}" if len(entries) == 1 else f"{fields}: {REASON}"
    return ProblemError(422, "unstorable-text", "Invalid request", detail, errors=entries)


async def storable_request(request: Request) -> None:
    """Refuse (422) a request with an unstorable string anywhere in its JSON body, its query or
    its path (a dependency of every ``/v1`` route, after the caller is known and admitted). The
    body is the one FastAPI has already parsed (Starlette keeps it on the request)."""
    body: Any = None
    if await request.body():
        try:
            body = await request.json()
        except ValueError:  # not JSON: the route's own parsing answers it
            body = None
    entries = unstorable_entries(body, request.query_params.multi_items(), request.path_params)
    if entries:
        raise refusal(entries)
