"""``cronwheel cluster status``."""

from __future__ import annotations

from collections import Counter
from typing import Any

from cronwheel.cli import global_options as shared
from cronwheel.cli.output import Ctx, api_command, table, when


@shared.group(*shared.GLOBAL)
def cluster(**_: Any) -> None:
    """Look at the cluster."""


@cluster.command()
@api_command
def status(ctx: Ctx) -> None:
    """The mode (which technologies keep the cluster's state), nodes (with where each serves its
    metrics), leader, watchdog (the node whose notifier watches for missed slots and delivers
    notifications), shard ownership with epochs, queues and active runs."""
    data = ctx.client.cluster_status()
    ctx.emit(data, _render)


def _render(data: dict[str, Any]) -> str:
    owned = Counter(shard["node"] for shard in data["shards"])
    nodes = table(
        ["NODE", "ROLES", "LEADER", "WATCHDOG", "SHARDS", "LAST HEARTBEAT", "METRICS"],
        [
            [
                n["node"],
                ",".join(n["roles"]),
                "yes" if n["node"] == data["leader"] else "",
                "yes" if n["node"] == data.get("watchdog") else "",
                owned.get(n["node"], 0),
                when(n["last_heartbeat"]),
                n.get("metrics_url") or "-",
            ]
            for n in data["nodes"]
        ],
    )
    epochs = [shard["epoch"] for shard in data["shards"]]
    shards = f"shards: {len(data['shards'])} owned" + (
        f", epochs {min(epochs)}-{max(epochs)}" if epochs else ""
    )
    queues = table(
        ["QUEUE", "DEPTH", "LAG"], [[q["name"], q["depth"], f"{q['lag_s']:.3f}s"] for q in data["queues"]]
    )
    runs = "runs: " + ", ".join(f"{state} {count}" for state, count in data["runs"].items())
    watchdog = f"watchdog: {data.get('watchdog') or 'none (nobody watches for missed slots)'}"
    return "\n".join([_mode(data), "", nodes, "", watchdog, shards, "", queues, "", runs])


def _mode(data: dict[str, Any]) -> str:
    """Where the cluster keeps its state: ``mode: postgresql (store, coordinator and queue)``."""
    mode = data.get("mode") or {}
    name = mode.get("name", "unknown (an older server)")
    parts = [f"{part} {mode[part]}" for part in ("store", "coordinator", "queue") if part in mode]
    return f"mode: {name}" + (f" ({', '.join(parts)})" if parts else "")
