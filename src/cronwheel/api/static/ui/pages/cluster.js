// The cluster page (#/cluster): the mode, leader and watchdog, runs by state, fire lateness
// percentiles, nodes, queues and shard leases.

import { get } from "../api.js";
import { h, kv, live, seconds, showError, table, view, when } from "../dom.js";

export function clusterPage() {
  const status = h("span", { class: "live" });
  const message = h("div", {});
  const body = h("div", {});
  const draw = async () => {
    const c = await get("/cluster");
    const lateness = c.fire_lateness;
    const ms = (value) => (value === null || value === undefined ? "—" : `${value.toFixed(1)} ms`);
    body.replaceChildren(
      h("div", { class: "grid" },
        h("div", { class: "card" }, kv([["Mode", c.mode ? `${c.mode.name} (coordinator ${c.mode.coordinator}, queue ${c.mode.queue})` : "—"], ["Leader", c.leader || "none"], ["Watchdog", c.watchdog || "none"], ...Object.entries(c.runs).map(([state, n]) => [`Runs ${state}`, n])])),
        h("div", { class: "card", id: "lateness" },
          h("h2", {}, "Fire lateness"),
          h("p", { class: "muted" }, `queued − slot of the scheduled runs of the last ${Math.round(lateness.window_s / 60)} minutes (${lateness.count} runs)`),
          h("div", { class: "percentiles" }, [["p50", lateness.p50_ms], ["p90", lateness.p90_ms], ["p99", lateness.p99_ms], ["max", lateness.max_ms]]
            .map(([name, value]) => h("div", { class: "stat", "data-stat": name }, h("span", { class: "muted" }, name), h("strong", {}, ms(value))))))),
      h("h2", {}, "Nodes"),
      table(["Node", "Roles", "Since", "Last heartbeat"], c.nodes.map((n) => h("tr", {}, h("td", {}, n.node, n.node === c.leader ? " (leader)" : "", n.node === c.watchdog ? " (watchdog)" : ""), h("td", {}, n.roles.join(", ")), h("td", {}, when(n.since)), h("td", {}, when(n.last_heartbeat)))), { id: "nodes" }),
      h("h2", {}, "Queues"),
      table(["Queue", "Depth", "Lag"], c.queues.map((q) => h("tr", {}, h("td", {}, q.name), h("td", { class: "num" }, q.depth), h("td", { class: "num" }, seconds(q.lag_s))))),
      h("h2", {}, "Shards"),
      c.shards.length
        ? table(["Shard", "Owner", "Epoch"], c.shards.map((s) => h("tr", {}, h("td", { class: "num" }, s.shard), h("td", {}, s.node || "none"), h("td", { class: "num" }, s.epoch))))
        : h("p", { class: "muted" }, "No shard leases: a single node (cronwheel server) owns every shard.")
    );
  };
  view.replaceChildren(h("h1", {}, "Cluster", status), message, body);
  return live(draw, status).catch((e) => showError(message, e));
}
