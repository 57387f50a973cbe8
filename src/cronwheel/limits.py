"""The operator's limits: how much one request, one caller and one team may take of a server.

One record, :class:`Limits`, holds them all; ``cronwheel server`` and ``cronwheel api`` take each
as an option with a ``CRONWHEEL_*`` variable, declared on its field (:mod:`cronwheel.settings`;
docs/service.md, docs/security.md "Limits"). The API
enforces the request limits (:mod:`cronwheel.api.guards.limits`); the job service the team quota and the
minimum interval between fires, wherever a job is written. Each refusal is a precise error that
writes nothing (guarantee 6, docs/guarantees.md).

The defaults protect a small server (2 cores, SQLite) without getting in the way of the
quickstart: the largest body a job can legitimately need fits with room to spare, a team may keep
10,000 live jobs (the steady load docs/performance.md measures comfortably at one fire a minute
each), and every schedule the engine accepts is allowed (``min_interval_s`` 1: an operator who
wants no sub-minute jobs sets 60).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from cronwheel.errors import InvalidInputError, PermanentError
from cronwheel.schedule import Schedule
from cronwheel.schedule.gaps import Gap, shortest_gap
from cronwheel.settings import API, option

KIB = 1024
MIB = 1024 * KIB

MAX_MIN_INTERVAL_S = 7 * 86_400
"""The largest minimum interval an operator may set: a week (a longer one would refuse ``@weekly``)."""

_API = frozenset({API})  # the API enforces every limit


@dataclass(frozen=True, slots=True)
class Limits:
    """What one request, one caller and one team may take (0 turns a rate, quota or interval off).

    * ``max_body_bytes``: a request body, counted as it arrives (413). The largest body a job can
      legitimately need is 1.09 MiB (a command target whose ``argv`` and ``env`` fill what
      ``execve`` takes, a 64 KiB payload, every label and the longest description, as compact
      JSON); 2 MiB leaves room for whitespace and escapes.
    * ``max_header_count``, ``max_header_bytes``: a request's header fields, and their names and
      values together (431). Browsers send about 15; an OIDC token with group claims can take 8 KiB.
    * ``rate_per_s``, ``rate_burst``: a token bucket per caller (429 with ``Retry-After``): a
      caller may make ``rate_burst`` requests at once, then ``rate_per_s`` a second. A small
      server answers about 115 job reads or 55 job creates a second (one keep-alive client, the
      2-core VM of docs/performance.md): one caller in a loop gets less than half of it, and a
      deploy that creates a few hundred jobs at once, or a client polling every 50 ms, is not
      held back.
    * ``max_jobs_per_team``: live jobs of one team (409 ``quota-exceeded``).
    * ``min_interval_s``: the shortest time a schedule may leave between two fires, DST included
      (422 naming ``schedule``).
    * ``max_streams``, ``max_streams_per_caller``: open event streams (``GET /v1/events``) of one
      api process, and of one caller in it (429 ``too-many-streams`` beyond). A dashboard tab
      holds one; each costs a connection and a little memory, no query of its own.
    """

    max_body_bytes: int = field(
        default=2 * MIB,
        metadata=option(
            "--max-body-bytes",
            "The largest request body the API reads (413 beyond; the largest job is about 1.1 MiB).",
            roles=_API,
            low=1024,
        ),
    )
    max_header_count: int = field(
        default=100,
        metadata=option(
            "--max-header-count", "Header fields a request may have (431 beyond).", roles=_API, low=10
        ),
    )
    max_header_bytes: int = field(
        default=32 * KIB,
        metadata=option(
            "--max-header-bytes",
            "Bytes of a request's header names and values together (431 beyond).",
            roles=_API,
            low=1024,
        ),
    )
    rate_per_s: float = field(
        default=50.0,
        metadata=option(
            "--rate-limit",
            "API requests a second per caller, per api process (429 beyond); 0: no limit.",
            roles=_API,
            low=0,
        ),
    )
    rate_burst: int = field(
        default=500,
        metadata=option(
            "--rate-burst",
            "API requests a caller may make at once before --rate-limit applies.",
            roles=_API,
            low=1,
        ),
    )
    max_jobs_per_team: int = field(
        default=10_000,
        metadata=option(
            "--max-jobs-per-team", "Live jobs a team may have (409 beyond); 0: no quota.", roles=_API, low=0
        ),
    )
    min_interval_s: int = field(
        default=1,
        metadata=option(
            "--min-interval",
            "Seconds a schedule must leave between two fires, DST included (422 when closer); "
            "60 forbids sub-minute jobs.",
            roles=_API,
            low=0,
            high=MAX_MIN_INTERVAL_S,
        ),
    )

    max_streams: int = field(
        default=1000,
        metadata=option(
            "--max-streams",
            "Event streams (GET /v1/events) open at once in one api process (429 beyond).",
            roles=_API,
            low=1,
        ),
    )
    max_streams_per_caller: int = field(
        default=16,
        metadata=option(
            "--max-streams-per-caller",
            "Event streams one caller (token or OIDC subject) may hold open in one api process (429 beyond).",
            roles=_API,
            low=1,
        ),
    )

    def check(self) -> None:
        """Refuse settings that cannot work (a PermanentError naming the option)."""
        for flag, value, least in (
            ("--max-body-bytes", self.max_body_bytes, 1024),
            ("--max-header-count", self.max_header_count, 10),
            ("--max-header-bytes", self.max_header_bytes, 1024),
            ("--max-streams", self.max_streams, 1),
            ("--max-streams-per-caller", self.max_streams_per_caller, 1),
        ):
            if value < least:
                raise PermanentError(f"{flag} must be at least {least}, not {value}")
        if self.rate_per_s < 0 or (self.rate_per_s > 0 and self.rate_burst < 1):
            raise PermanentError("--rate-limit must be 0 (off) or positive, with --rate-burst at least 1")
        if self.max_jobs_per_team < 0:
            raise PermanentError(
                f"--max-jobs-per-team must be 0 (no quota) or positive, not {self.max_jobs_per_team}"
            )
        if not 0 <= self.min_interval_s <= MAX_MIN_INTERVAL_S:
            raise PermanentError(
                f"--min-interval must be in [0, {MAX_MIN_INTERVAL_S}] seconds, not {self.min_interval_s}"
            )

    @property
    def team_quota(self) -> int | None:
        """The quota the store enforces (None: none)."""
        return self.max_jobs_per_team or None

    def check_interval(self, schedule: Schedule, now: datetime) -> None:
        """Refuse a schedule that fires twice within ``min_interval_s`` (:class:`TooFrequentError`)."""
        if self.min_interval_s <= 1:  # fire times are whole, distinct seconds: never closer than 1 s
            return
        gap = shortest_gap(schedule, now, below=self.min_interval_s)
        if gap is not None:
            raise TooFrequentError(schedule, gap, self.min_interval_s)


class TooFrequentError(InvalidInputError):
    """A schedule whose fires come closer together than the operator's minimum interval."""

    field = "schedule"

    def __init__(self, schedule: Schedule, gap: Gap, minimum_s: int) -> None:
        self.shortest_s = gap.seconds
        self.minimum_s = minimum_s
        super().__init__(
            f"{schedule.expression!r} ({schedule.timezone}) fires {_span(gap.seconds)} apart "
            f"({gap.first.isoformat()}, then {gap.second.isoformat()}); this server allows at least "
            f"{_span(minimum_s)} between fires (--min-interval)"
        )


def _span(seconds: int) -> str:
    if seconds >= 3600 and seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    if seconds >= 120 and seconds % 60 == 0:
        return f"{seconds // 60} min"
    return f"{seconds} s"
