// The cluster page (#/cluster, an admin of every team): the mode, leader and watchdog, runs by
// state, fire lateness percentiles, nodes, queues, and the shards: each node's share of them (and
// the unowned ones) as one stacked bar, the table of every shard only when asked for.

import { can } from "../access.js";
import { get } from "../api.js";
import { h, kv, live, seconds, showError, svgNode, table, view, when } from "../dom.js";
import { session } from "../state.js";
import { missingPage, orMissing } from "./missing.js";

const COLOURS = 8; // .seg-0 … .seg-7 in style.css, reused round the nodes

// Shards per owner (node name, or null for none), from GET /v1/cluster. With no shard lease at all,
// an embedded server's one process owns every shard.
function owners(c) {
  const byShard = new Map(c.shards.map((s) => [s.shard, s]));
  const embedded = !c.shards.length && c.mode && c.mode.coordinator === "local" && c.nodes.length === 1;
  const owner = (shard) => (embedded ? c.nodes[0].node : (byShard.get(shard) || {}).node || null);
  return Array.from({ length: c.shard_count }, (_, shard) => ({ shard, node: owner(shard), epoch: byShard.has(shard) ? byShard.get(shard).epoch : null }));
}

function shardBar(rows, total) {
  const counts = new Map();
  for (const { node } of rows) counts.set(node, (counts.get(node) || 0) + 1);
  const nodes = [...counts.keys()].filter((n) => n !== null).sort();
  const segments = [...nodes.map((node, i) => [node, counts.get(node), `seg-${i % COLOURS}`]), [null, counts.get(null) || 0, "unowned"]].filter(([, n]) => n > 0);
  let x = 0;
  const share = (n) => `${n} of ${total} shards (${((100 * n) / total).toFixed(1)} %)`;
  const rects = segments.map(([node, n, cls]) => {
    const rect = svgNode("rect", { x, y: 0, width: n, height: 10, class: `seg ${cls}`, "data-node": node ?? "unowned", "data-shards": n }, svgNode("title", {}, `${node ?? "unowned"}: ${share(n)}`));
    x += n;
    return rect;
  });
  const summary = segments.map(([node, n]) => `${node ?? "unowned"} ${n}`).join(", ");
  return h("div", { class: "card", id: "shard-share" },
    svgNode("svg", { viewBox: `0 0 ${total} 10`, preserveAspectRatio: "none", class: "shard-bar", role: "img", "aria-label": `shards per node: ${summary}` }, ...rects),
    h("ul", { class: "shard-legend" }, segments.map(([node, n, cls]) => h("li", { "data-node": node ?? "unowned" },
      svgNode("svg", { viewBox: "0 0 10 10", class: "swatch" }, svgNode("rect", { width: 10, height: 10, class: `seg ${cls}` })),
      ` ${node ?? "unowned"}: ${share(n)}`))));
}

const shardTable = (rows) => table(["Shard", "Owner", "Epoch"], rows.map((s) => h("tr", {}, h("td", { class: "num" }, s.shard), h("td", {}, s.node || "none"), h("td", { class: "num" }, s.epoch ?? "—"))), { id: "shards" });

export function clusterPage() {
  if (!can("cluster")) {
    const teams = session.caller.teams === null ? "every team" : `team ${session.caller.teams.join(", ")}`;
    return missingPage("not-allowed", "the cluster page", `It needs an admin token of every team; this session has ${session.caller.scopes.join(", ")} of ${teams}.`);
  }
  const status = h("span", { class: "live" });
  const message = h("div", {});
  const body = h("div", {});
  const shards = h("div", {});
  let rows = [];
  let open = false; // the shard table is drawn only once asked for
  const toggle = h("button", { type: "button", id: "show-shards", "aria-expanded": "false" }, "Show shards");
  const drawShards = () => {
    toggle.textContent = open ? "Hide shards" : `Show shards (${rows.length})`;
    toggle.setAttribute("aria-expanded", String(open));
    shards.replaceChildren(open ? shardTable(rows) : "");
  };
  toggle.addEventListener("click", () => { open = !open; drawShards(); });
  const draw = async () => {
    const c = await get("/cluster");
    rows = owners(c);
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
      c.shards.length ? "" : h("p", { class: "muted" }, "No shard leases: a single node (cronwheel server) owns every shard."),
      shardBar(rows, c.shard_count)
    );
    drawShards();
  };
  view.replaceChildren(h("h1", {}, "Cluster", status), message, body, toggle, shards);
  return live(orMissing(draw, "the cluster page"), status, ["cluster"]).catch((e) => showError(message, e));
}
