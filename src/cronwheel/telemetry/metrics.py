"""What operators alert on, in the Prometheus text format (``GET /metrics``).

Fire lateness above all: how long after its slot a run's trigger was queued
(``cronwheel_fire_lateness_seconds``) and its first attempt started
(``cronwheel_start_lateness_seconds``). Figures read from a backend when scraped (queue depth,
lag, shards owned, leadership) are in :mod:`cronwheel.cluster.gauges`. docs/operations.md lists
every metric; ``tests/test_metrics_doc.py`` holds that table equal to this registry.

**Cardinality.** No label ever names a job or a run. ``team`` and ``queue`` are the only labels
that come from users' data: queues are the operator's (``--queue``), teams are created by an admin
(who issues their tokens), and as a guard a process labels at most :data:`MAX_TEAM_LABELS`
distinct teams, counting any further team under ``team="_other"``.
"""

from __future__ import annotations

import threading

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

REGISTRY = CollectorRegistry(auto_describe=True)

_LATENESS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)

FIRE_LATENESS = Histogram(
    "cronwheel_fire_lateness_seconds",
    "Seconds from a run's slot to its trigger being queued.",
    buckets=_LATENESS_BUCKETS,
    registry=REGISTRY,
)
START_LATENESS = Histogram(
    "cronwheel_start_lateness_seconds",
    "Seconds from a run's slot to the start of its first attempt.",
    buckets=_LATENESS_BUCKETS,
    registry=REGISTRY,
)
RUNS_RECORDED = Counter(
    "cronwheel_runs_recorded_total",
    "Runs recorded by the scheduler, by state (PENDING fired or backfilled, SKIPPED) and reason.",
    ["state", "reason"],
    registry=REGISTRY,
)
STALE_FIRINGS = Counter(
    "cronwheel_stale_firings_total",
    "Firings the store refused because the job had moved on (edited, fired elsewhere).",
    registry=REGISTRY,
)
FENCED_FIRINGS = Counter(
    "cronwheel_fenced_firings_total",
    "Firings the store refused because another node holds a newer lease (epoch) on the shard.",
    registry=REGISTRY,
)
ATTEMPTS = Counter(
    "cronwheel_attempts_total",
    "Finished attempts by outcome.",
    ["outcome"],
    registry=REGISTRY,
)
REQUEUED = Counter(
    "cronwheel_requeued_runs_total",
    "Runs the store-side sweep queued again (lost triggers, expired leases).",
    registry=REGISTRY,
)
RUNS_FINISHED = Counter(
    "cronwheel_runs_finished_total",
    "Runs finished, by final state (SUCCESS, FAILED), team and queue: by a worker, or FAILED by the "
    "sweep after their workers lost too many leases.",
    ["state", "team", "queue"],
    registry=REGISTRY,
)
RETRIES = Counter(
    "cronwheel_retries_total",
    "Attempts that failed and were scheduled to be retried (the run went RETRYING), by team and queue.",
    ["team", "queue"],
    registry=REGISTRY,
)
QUEUE_RECLAIMS = Counter(
    "cronwheel_queue_reclaims_total",
    "Triggers a worker received again: an earlier delivery was not acknowledged within the "
    "visibility timeout (its worker stalled, crashed or restarted).",
    ["queue"],
    registry=REGISTRY,
)
DEAD_LETTERED = Counter(
    "cronwheel_dead_lettered_total",
    "Triggers moved to the dead letters (handed out too many times without an acknowledgement): the "
    "Redis queue's dead-letter stream, the PostgreSQL queue's dead_triggers table; by queue. Their "
    "runs are not lost: the sweep queues them again from the store.",
    ["queue"],
    registry=REGISTRY,
)
LEADER_ELECTIONS = Counter(
    "cronwheel_leader_elections_total",
    "Times this node became the cluster's leader (summed over nodes: leader changes).",
    registry=REGISTRY,
)
LEASES_LOST = Counter(
    "cronwheel_leases_lost_total",
    "Times this node's coordinator lease lapsed or was lost, dropping every shard it held.",
    registry=REGISTRY,
)
SHARD_CLAIMS_REFUSED = Counter(
    "cronwheel_shard_claims_refused_total",
    "Shard leases the store refused to register because a newer epoch of the shard exists.",
    registry=REGISTRY,
)
API_REQUESTS = Counter(
    "cronwheel_api_requests_total",
    "API requests answered, by method, route template (never the raw path) and status code.",
    ["method", "route", "status"],
    registry=REGISTRY,
)
API_LATENCY = Histogram(
    "cronwheel_api_request_duration_seconds",
    "Seconds the API took to answer, by method and route template (for `/v1/events`, how long "
    "its streams stayed open: up to 300).",
    ["method", "route"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 10.0),
    registry=REGISTRY,
)
LIVE_FAILURES = Counter(
    "cronwheel_metrics_source_failures_total",
    "Scrapes where a backend read for live figures (queue, coordinator) failed or timed out; "
    "those figures were left out of that scrape.",
    ["source"],
    registry=REGISTRY,
)

MAX_TEAM_LABELS = 100
OTHER_TEAM = "_other"
_teams: set[str] = set()
_teams_lock = threading.Lock()


def team_label(team: str | None) -> str:
    """The ``team`` label value for ``team``: itself for the first :data:`MAX_TEAM_LABELS`
    distinct teams this process labels, ``_other`` beyond (``""``: no job, it was deleted)."""
    if not team:
        return ""
    with _teams_lock:
        if team in _teams or len(_teams) < MAX_TEAM_LABELS:
            _teams.add(team)
            return team
    return OTHER_TEAM


WALL_CLOCK_SKEW = Gauge(
    "cronwheel_wall_clock_skew_seconds",
    "How far this node's wall clock is ahead of the store's clock (cluster nodes fire by the store's).",
    registry=REGISTRY,
)
NOTIFICATIONS_SENT = Counter(
    "cronwheel_notifications_sent_total",
    "Notifications delivered, by channel type (webhook, slack, email).",
    ["channel"],
    registry=REGISTRY,
)
NOTIFICATIONS_FAILED = Counter(
    "cronwheel_notifications_failed_total",
    "Notification delivery tries that failed (each is retried until it gives up), by channel type.",
    ["channel"],
    registry=REGISTRY,
)
RUNS_PURGED = Counter(
    "cronwheel_runs_purged_total",
    "Terminal runs (with their attempts and events) deleted by the retention policy.",
    registry=REGISTRY,
)
