"""What an event stream follows and which changes it hears, as pure decisions.

A stream names its topics in one comma-separated list: ``jobs`` (every job of the caller's teams),
``runs`` (every run of them), ``job:<id>`` (one job and its runs), ``run:<id>`` (one run) and
``cluster`` (the cluster's status). A :class:`Change` says what changed, with enough for a page to
re-read what it shows (``job``: id and version, or ``deleted``; ``run``: id, job and state;
``output``: a running attempt's output so far, heard only by streams that follow its run by id), and
the team it belongs to, so that a stream hears only changes of its caller's teams. ``reload``
means "changes may have been missed: re-read everything" (a lost store listener, a stream that
fell behind); it reaches every stream.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from cronwheel.model import OutputChange, utc_text
from cronwheel.store import RunChange

MAX_TOPICS = 32
# an id: printable ASCII but the comma and the space, in words that Python, pydantic and JSON Schema
# (ECMA-262) read alike (their \s differ: Python's takes \x1c-\x1f)
TOPIC = r"(?:jobs|runs|cluster|(?:job|run):[\x21-\x2b\x2d-\x7e]+)"
TOPICS_PATTERN = rf"^{TOPIC}(?:,{TOPIC}){{0,{MAX_TOPICS - 1}}}$"  # the API document's
TOPICS_HELP = (
    "Comma-separated, no spaces: jobs, runs, cluster, job:<id>, run:<id> "
    f"(at most {MAX_TOPICS}; a job or run of another team is a 404, cluster needs an admin of every team)"
)
SLACK = 200  # run event ids re-read at every poll (see RunWindow)


class TopicsError(ValueError):
    """A topic list that names nothing this API follows (its message says which part)."""


@dataclass(frozen=True, slots=True)
class Topics:
    jobs: bool = False
    runs: bool = False
    cluster: bool = False
    job_ids: frozenset[str] = frozenset()
    run_ids: frozenset[str] = frozenset()


def parse_topics(text: str) -> Topics:
    """The topics of ``text`` (``jobs,job:abc``: :data:`TOPICS_PATTERN`); a :class:`TopicsError`
    for an empty list, more than :data:`MAX_TOPICS`, or a part that is no topic."""
    parts = text.split(",")
    if len(parts) > MAX_TOPICS:
        raise TopicsError(f"at most {MAX_TOPICS} topics, not {len(parts)}")
    flags = {"jobs": False, "runs": False, "cluster": False}
    ids: dict[str, set[str]] = {"job": set(), "run": set()}
    for part in parts:
        if not part:
            raise TopicsError("an empty topic (two commas, or one at an end)")
        if not re.fullmatch(TOPIC, part):
            raise TopicsError(f"unknown topic {part[:64]!r}: use jobs, runs, cluster, job:<id> or run:<id>")
        kind, sep, ident = part.partition(":")
        if sep:
            ids[kind].add(ident)
        else:
            flags[kind] = True
    return Topics(**flags, job_ids=frozenset(ids["job"]), run_ids=frozenset(ids["run"]))


@dataclass(frozen=True, slots=True)
class Change:
    """One event: its ``kind`` (``job``, ``run``, ``cluster``, ``reload``) and data, and whose it is."""

    kind: str
    data: dict[str, Any] = field(default_factory=dict)
    team: str | None = None  # None: not one team's (cluster, reload)
    job_id: str | None = None
    run_id: str | None = None


RELOAD = Change("reload")
CLUSTER = Change("cluster")


def job_change(job_id: str, team: str, version: int | None) -> Change:
    """A job written (``version`` its version now) or deleted (``version`` None)."""
    data: dict[str, Any] = {"id": job_id, "team": team}
    data.update({"deleted": True} if version is None else {"version": version})
    return Change("job", data, team, job_id=job_id)


def run_change(change: RunChange) -> Change:
    data = {"id": change.run_id, "job_id": change.job_id, "team": change.team, "state": change.state.value}
    return Change("run", data, change.team, job_id=change.job_id, run_id=change.run_id)


def output_change(change: OutputChange) -> Change:
    """A running attempt's output so far (up to 64 KiB), as its worker last wrote it."""
    data = {"id": change.run_id, "job_id": change.job_id, "team": change.team, "attempt": change.attempt,
            "output": change.output, "at": utc_text(change.at)}  # fmt: skip
    return Change("output", data, change.team, job_id=change.job_id, run_id=change.run_id)


def hears(topics: Topics, teams: frozenset[str] | None, change: Change) -> bool:
    """Whether a stream of ``topics``, for a caller of ``teams`` (None: every team), hears ``change``."""
    if change.kind == "reload":
        return True
    if change.kind == "cluster":
        return topics.cluster
    if change.team is None or (teams is not None and change.team not in teams):
        return False
    return _follows(topics, change)


def _follows(topics: Topics, change: Change) -> bool:
    """Whether ``topics`` follow what ``change`` is about (its team heard already)."""
    if change.kind == "output":  # up to 64 KiB a second: only to the streams that follow the run by id
        return change.run_id in topics.run_ids
    if change.job_id in topics.job_ids:
        return True
    if change.kind == "job":
        return topics.jobs
    return topics.runs or change.run_id in topics.run_ids


def frame(change: Change) -> bytes:
    """``change`` as a server-sent event."""
    return f"event: {change.kind}\ndata: {json.dumps(change.data, separators=(',', ':'))}\n\n".encode()


HEARTBEAT = b": heartbeat\n\n"


def opening(retry_ms: int) -> bytes:
    """The first bytes of a stream: how long a client waits before it reconnects, and a comment
    that gets the answer's head through proxies at once."""
    return f"retry: {retry_ms}\n: open\n\n".encode()


@dataclass(slots=True)
class RunWindow:
    """Which run events a poll tells. PostgreSQL numbers an event at its insert and transactions
    commit in any order, so an event with a lower id can become visible after a higher one was
    read: each poll re-reads the :data:`SLACK` ids below the highest seen and tells only the
    events it has not told yet; none at or below ``floor``, the newest when following began."""

    floor: int
    top: int = 0
    told: set[int] = field(default_factory=set)

    def __post_init__(self) -> None:
        self.top = max(self.top, self.floor)

    @property
    def after(self) -> int:
        """Where the next read starts (exclusive)."""
        return max(0, self.top - SLACK)

    def take(self, changes: list[RunChange]) -> list[RunChange]:
        """The events of ``changes`` not told yet (and remember them)."""
        fresh = [c for c in changes if c.event_id > self.floor and c.event_id not in self.told]
        self.told.update(change.event_id for change in fresh)
        self.top = max([self.top, *(change.event_id for change in changes)])
        self.told = {event_id for event_id in self.told if event_id > self.after}
        return fresh
