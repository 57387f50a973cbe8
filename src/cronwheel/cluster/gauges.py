"""Figures read from the backends when ``/metrics`` is scraped, not polled: each queue's depth,
pending, delayed and lag (``Queue.stats``), the shards this node owns and whether it leads
(the coordinator).

A scrape first awaits :func:`refresh` (bounded by ``timeout_s``: a Redis or etcd that does not
answer delays a scrape by that much at most), then renders the registry, whose
:class:`LiveCollector` yields what the refresh read. A source that failed or timed out is left
out of that scrape (its series vanish, which ``absent()`` alerts see) and counted in
``cronwheel_metrics_source_failures_total{source}``.

One process serves one node: :func:`attach` names its queue, queues and coordinator (the last
attach wins; :func:`detach` at shutdown). Every node reads the queues it was started with, so a
cluster exports each queue's figures once per node: aggregate them with ``max by (queue)``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from prometheus_client import generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from cronwheel.coordinator import Coordinator
from cronwheel.model import SHARDS
from cronwheel.queue import Queue, QueueStats
from cronwheel.telemetry import metrics

log = logging.getLogger("cronwheel.metrics")

T = TypeVar("T")
TIMEOUT_S = 2.0

_QUEUE_GAUGES = (
    ("cronwheel_queue_depth", "Triggers due and waiting to be handed out to a worker.", "ready"),
    ("cronwheel_queue_pending", "Triggers handed out to a worker and not yet acknowledged.", "pending"),
    ("cronwheel_queue_delayed", "Triggers held until a later due time (retries).", "delayed"),
    (
        "cronwheel_queue_lag_seconds",
        "Age of the oldest trigger that is due and not yet acknowledged (0: none).",
        "lag_s",
    ),
)
_NODE_GAUGES = (
    ("cronwheel_shards_owned", "Shards whose lease this node holds (a scheduler fires only those)."),
    ("cronwheel_shards", "Shards in the cluster (a fixed number): the sum of shards_owned should equal it."),
    ("cronwheel_leader", "1 while this node is the cluster's leader, else 0."),
    (
        "cronwheel_watchdog",
        "1 while this node holds the watchdog duty (its notifier watches for missed slots), else 0.",
    ),
)


def catalog() -> list[tuple[str, tuple[str, ...], str]]:
    """(name, labels, help) of every gauge this collector yields (docs/operations.md lists them)."""
    queues = [(name, ("queue",), help_text) for name, help_text, _ in _QUEUE_GAUGES]
    return queues + [(name, (), help_text) for name, help_text in _NODE_GAUGES]


@dataclass
class Source:
    """What a node reads its live figures from."""

    node: str
    queue: Queue | None = None
    queues: tuple[str, ...] = ()
    coordinator: Coordinator | None = None


@dataclass
class _Read:
    queues: dict[str, QueueStats] = field(default_factory=dict)
    node: dict[str, float] = field(default_factory=dict)


class LiveCollector(Collector):
    def __init__(self) -> None:
        self.source: Source | None = None
        self._read = _Read()

    def describe(self) -> Iterable[Metric]:
        return ()  # read at scrape time: nothing to check at registration

    def collect(self) -> Iterable[Metric]:
        read = self._read
        for name, help_text, attribute in _QUEUE_GAUGES:
            family = GaugeMetricFamily(name, help_text, labels=["queue"])
            for queue, stats in sorted(read.queues.items()):
                family.add_metric([queue], float(getattr(stats, attribute)))
            yield family
        for name, help_text in _NODE_GAUGES:
            family = GaugeMetricFamily(name, help_text)
            if name in read.node:
                family.add_metric([], read.node[name])
            yield family

    async def refresh(self, timeout_s: float = TIMEOUT_S) -> None:
        """Read every figure of the attached source, each source within ``timeout_s``."""
        source = self.source
        if source is None:
            self._read = _Read()
            return
        queues, node = await asyncio.gather(
            _bounded("queue", _queue_stats(source.queue, source.queues), timeout_s),
            _bounded("coordinator", _node_figures(source), timeout_s),
        )
        self._read = _Read(queues or {}, node or {})


async def _queue_stats(queue: Queue | None, names: Sequence[str]) -> dict[str, QueueStats]:
    if queue is None:
        return {}
    found = await asyncio.gather(*(queue.stats(name) for name in names))
    return dict(zip(names, found, strict=True))


async def _node_figures(source: Source) -> dict[str, float]:
    coordinator = source.coordinator
    if coordinator is None:
        return {}
    owned = len(coordinator.owned_shards())
    leader, watchdog = await asyncio.gather(coordinator.leader(), coordinator.watchdog())
    return {
        "cronwheel_shards_owned": float(owned),
        "cronwheel_shards": float(SHARDS),
        "cronwheel_leader": 1.0 if leader == source.node else 0.0,
        "cronwheel_watchdog": 1.0 if watchdog == source.node else 0.0,
    }


async def _bounded(name: str, work: Coroutine[Any, Any, T], timeout_s: float) -> T | None:
    """``work``'s result, or None (counted, logged at DEBUG) when it failed or timed out."""
    try:
        return await asyncio.wait_for(work, timeout_s)
    except Exception as error:  # a scrape must answer whatever the backend does
        metrics.LIVE_FAILURES.labels(name).inc()
        log.debug("live metrics unavailable", extra={"source": name, "error": repr(error)})
        return None


LIVE = LiveCollector()
metrics.REGISTRY.register(LIVE)


def attach(source: Source) -> None:
    LIVE.source = source


def detach(source: Source) -> None:
    if LIVE.source is source:
        LIVE.source = None


async def scrape(timeout_s: float = TIMEOUT_S) -> bytes:
    """The Prometheus text of this process: the live figures read first, then the registry."""
    await LIVE.refresh(timeout_s)
    return generate_latest(metrics.REGISTRY)
