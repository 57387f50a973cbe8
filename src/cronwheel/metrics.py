"""What operators alert on, in the Prometheus text format (``GET /metrics``).

Fire lateness above all: how long after its slot a run's trigger was queued
(``cronwheel_fire_lateness_seconds``) and its first attempt started
(``cronwheel_start_lateness_seconds``).
"""

from __future__ import annotations

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
    "Runs recorded by the scheduler, by state (PENDING fired, SKIPPED) and reason.",
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
WALL_CLOCK_SKEW = Gauge(
    "cronwheel_wall_clock_skew_seconds",
    "How far this node's wall clock is ahead of the store's clock (cluster nodes fire by the store's).",
    registry=REGISTRY,
)
RUNS_PURGED = Counter(
    "cronwheel_runs_purged_total",
    "Terminal runs (with their attempts and events) deleted by the retention policy.",
    registry=REGISTRY,
)
