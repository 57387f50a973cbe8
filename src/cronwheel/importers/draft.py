"""A job on its way out of an importer: its fields, its notes, and the name it asks for; and
:func:`finish`, which gives every draft a valid, unique name and says so where it differs.

Notes are written before names are final, so a note's action may hold ``{job}``: finishing
replaces it with ``TEAM/NAME`` of the job it is about.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from cronwheel.importers.report import ImportResult, Note, NoteKind

NAME_LIMIT = 100
NAME = re.compile(r"[A-Za-z0-9._-]{1,100}")  # the API's names (of jobs and teams)
_INVALID = re.compile(r"[^A-Za-z0-9._-]+")
PAUSE_AFTER_APPLY = (
    "suspended in the source: the file says paused: true, but apply creates it active (it leaves "
    "pausing alone): pause it right after applying; a slot due in between fires"
)


@dataclass
class Draft:
    """``wanted``: the source's own name, or one derived from the entry (``named`` false)."""

    source: str
    wanted: str
    named: bool = True
    job: dict[str, Any] = field(default_factory=dict)
    notes: list[tuple[NoteKind, str, str | None]] = field(default_factory=list)

    def note(self, kind: NoteKind, message: str, action: str | None = None) -> None:
        self.notes.append((kind, message, action))


def valid_name(wanted: str, fallback: str) -> str:
    """``wanted`` in the API's name alphabet: other characters become ``-``, at most
    :data:`NAME_LIMIT` characters (room kept for a suffix); ``fallback`` when nothing is left."""
    name = _INVALID.sub("-", wanted).strip("-.")[: NAME_LIMIT - 4].rstrip("-.")
    return name or fallback


def finish(entries: list[Draft | Note], team: str) -> ImportResult:
    """The result, in source order: each draft named (the first keeps a contested name) and
    followed by its notes; a note given as it is (the file's, an entry left out) kept in place."""
    result = ImportResult()
    taken: set[str] = set()
    for index, draft in enumerate(entries, start=1):
        if isinstance(draft, Note):
            result.notes.append(draft)
            continue
        base = valid_name(draft.wanted, f"job-{index}")
        name = base
        suffix = 2
        while name.lower() in taken:  # names differing only in case confuse people: kept apart too
            name = f"{base}-{suffix}"
            suffix += 1
        taken.add(name.lower())
        result.jobs.append({"name": name, **draft.job})
        if not draft.named:
            result.notes.append(
                Note(draft.source, NoteKind.RENAMED, f"the source names no job: named {name!r}", name)
            )
        elif name != draft.wanted:
            why = "taken by an earlier job" if base == draft.wanted else "made a valid cronwheel name"
            result.notes.append(
                Note(draft.source, NoteKind.RENAMED, f"{draft.wanted!r} became {name!r} ({why})", name)
            )
        for kind, message, action in draft.notes:
            shown = None if action is None else action.replace("{job}", f"{team}/{name}")
            result.notes.append(Note(draft.source, kind, message, name, shown))
    return result


def skipped(source: str, why: str) -> Note:
    """The note of an entry left out."""
    return Note(source, NoteKind.SKIPPED, f"not imported: {why}")


def call_payload(args: Any, kwargs: Any) -> dict[str, Any]:
    """The payload of a job that called ``function(*args, **kwargs)`` in its source scheduler."""
    return {
        "args": list(args) if isinstance(args, list | tuple) else [],
        "kwargs": dict(kwargs) if isinstance(kwargs, dict) else {},
    }
