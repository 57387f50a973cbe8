"""Every metric cronwheel exports, read from its registry: names as scraped, types, labels and
help. docs/operations.md's metrics table is :func:`markdown_table` (``scripts/metrics-table``
rewrites it; ``tests/test_deploy.py`` holds the doc equal to it), and the dashboard and alert
rules are checked to name only :func:`scraped_names`.
"""

from __future__ import annotations

from dataclasses import dataclass

from prometheus_client.metrics import MetricWrapperBase

# Modules that register metrics of their own on import: load them so that the catalog is whole.
from cronwheel.api import app as _api  # noqa: F401
from cronwheel.cluster import gauges as metrics_live
from cronwheel.telemetry import metrics

_SUFFIXES = {
    "counter": ("_total",),
    "histogram": ("_bucket", "_sum", "_count"),
    "gauge": ("",),
}


@dataclass(frozen=True, slots=True)
class Family:
    name: str  # as documented: counters with _total, histograms by their base name
    type: str
    labels: tuple[str, ...]
    help: str

    @property
    def scraped(self) -> tuple[str, ...]:
        """The sample names a scrape holds (``_created`` series aside)."""
        base = self.name.removesuffix("_total")
        return tuple(base + suffix for suffix in _SUFFIXES.get(self.type, ("",)))


def families() -> list[Family]:
    """Every family of :data:`cronwheel.telemetry.metrics.REGISTRY`, sorted by name."""
    found: list[Family] = []
    for collector in list(metrics.REGISTRY._collector_to_names):  # no public listing: private names
        if isinstance(collector, MetricWrapperBase):
            kind = str(collector._type)
            name = collector._name + ("_total" if kind == "counter" else "")
            labels = tuple(collector._labelnames)
            found.append(Family(name, kind, labels, collector._documentation))
        elif collector is metrics_live.LIVE:
            found += [
                Family(name, "gauge", labels, help_text) for name, labels, help_text in metrics_live.catalog()
            ]
    return sorted(found, key=lambda family: family.name)


def scraped_names() -> set[str]:
    return {name for family in families() for name in family.scraped}


def markdown_table() -> str:
    lines = ["| Metric | Type | Labels | Meaning |", "|---|---|---|---|"]
    for family in families():
        labels = ", ".join(f"`{label}`" for label in family.labels) or "—"
        meaning = family.help.replace("|", "\\|")
        lines.append(f"| `{family.name}` | {family.type} | {labels} | {meaning} |")
    return "\n".join(lines) + "\n"
