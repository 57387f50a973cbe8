// The upcoming fires (#/upcoming, ?span=hour|day): how many jobs of the caller's teams fire in each
// second of the next hour (or minute of the next day), as bars stacked by team, and the busiest
// buckets with the teams that make them: the herd coming. Recounted every REFRESH_MS, on the
// usual polling's beat; the server shares one count for a few seconds among the viewers who ask
// the same window, so the recount of many open pages is one read of the store's grouped jobs.

import { get } from "../api.js";
import { h, live, showError, svgNode, table, view } from "../dom.js";

const REFRESH_MS = 15000;
const SPANS = {
  hour: { window: 3600, bucket: 1, label: "next hour, per second", tick: 600 },
  day: { window: 86400, bucket: 60, label: "next day, per minute", tick: 7200 },
};
const COLOURS = ["#3d5afe", "#e8710a", "#137333", "#b3261e", "#8e24aa", "#00838f", "#a05a00", "#5f6368"];
const BUSIEST = 10;

const clock = (iso) => iso.slice(11, 19);

// A team's colour mark, set through the CSSOM (the page's CSP refuses style attributes).
function swatch(colour) {
  const mark = h("span", { class: "swatch" }, "■ ");
  mark.style.color = colour;
  return mark;
}

// Each team its colour, the busiest teams first (beyond the palette, the last colour).
function colours(teams) {
  const order = Object.entries(teams).sort((a, b) => b[1] - a[1] || a[0].localeCompare(b[0]));
  return new Map(order.map(([team], i) => [team, COLOURS[Math.min(i, COLOURS.length - 1)]]));
}

function axes(answer, top, size) {
  const { width, height, left, bottom } = size;
  const span = answer.window_s === 3600 ? SPANS.hour : SPANS.day;
  const start = new Date(answer.start).getTime();
  const marks = [svgNode("line", { x1: left, y1: height - bottom, x2: width, y2: height - bottom, class: "axis" })];
  for (let s = 0; s <= answer.window_s; s += span.tick) {
    const x = left + (s / answer.window_s) * (width - left);
    const at = new Date(start + s * 1000).toISOString();
    marks.push(svgNode("line", { x1: x, y1: height - bottom, x2: x, y2: height - bottom + 4, class: "axis" }),
      svgNode("text", { x, y: height - 4, "text-anchor": "middle", class: "tick" }, at.slice(11, 16)));
  }
  marks.push(svgNode("text", { x: left - 4, y: 12, "text-anchor": "end", class: "tick" }, String(top)),
    svgNode("text", { x: left - 4, y: height - bottom, "text-anchor": "end", class: "tick" }, "0"));
  return marks;
}

// One column per bucket holding a fire, its teams stacked (busiest team at the bottom).
function bars(answer, palette) {
  const size = { width: 1000, height: 220, left: 36, bottom: 18 };
  const top = Math.max(1, ...answer.buckets.map((b) => b.total));
  const count = answer.window_s / answer.bucket_s;
  const step = (size.width - size.left) / count;
  const scale = (size.height - size.bottom - 4) / top;
  const root = svgNode("svg", { viewBox: `0 0 ${size.width} ${size.height}`, class: "herd", role: "img", "aria-label": "fires per bucket, by team" });
  root.append(...axes(answer, top, size));
  for (const bucket of answer.buckets) {
    const index = (new Date(bucket.at) - new Date(answer.start)) / 1000 / answer.bucket_s;
    const group = svgNode("g", { "data-bucket": bucket.at, "data-total": bucket.total });
    group.append(svgNode("title", {}, `${clock(bucket.at)} UTC: ${bucket.total} fires · ${describe(bucket.teams)}`));
    let y = size.height - size.bottom;
    for (const [team, n] of Object.entries(bucket.teams).sort((a, b) => b[1] - a[1])) {
      y -= n * scale;
      group.append(svgNode("rect", { x: size.left + index * step, y, width: Math.max(step, 1.5), height: n * scale, fill: palette.get(team), "data-team": team }));
    }
    root.append(group);
  }
  return root;
}

const describe = (teams) => Object.entries(teams).sort((a, b) => b[1] - a[1]).map(([team, n]) => `${team} ${n}`).join(", ");

function busiest(answer, palette) {
  const rows = [...answer.buckets].sort((a, b) => b.total - a.total || a.at.localeCompare(b.at)).slice(0, BUSIEST);
  if (!rows.length) return h("p", { class: "muted" }, "No job fires in this window.");
  return table(["When (UTC)", "Fires", "Teams"], rows.map((bucket) => h("tr", { "data-bucket": bucket.at },
    h("td", {}, clock(bucket.at)), h("td", { class: "num" }, bucket.total),
    h("td", {}, Object.entries(bucket.teams).sort((a, b) => b[1] - a[1]).map(([team, n]) =>
      h("span", { class: "team", "data-team": team }, swatch(palette.get(team)), `${team} ${n}`, " ")))
  )), { id: "busiest" });
}

function summary(answer, palette) {
  const legend = Object.entries(answer.teams).sort((a, b) => b[1] - a[1]).map(([team, n]) =>
    h("span", { class: "team" }, swatch(palette.get(team)), `${team} ${n} `));
  const capped = answer.capped ? ` · ${answer.capped} jobs fire more often than counted (their first fires are)` : "";
  return h("p", { class: "legend", id: "upcoming-summary" }, `${answer.fires} fires of ${answer.jobs} jobs from ${clock(answer.start)} UTC${capped} (counted at ${clock(answer.computed_at)}) · `, legend);
}

export function upcomingPage(params) {
  const span = SPANS[params.get("span")] ? params.get("span") : "hour";
  const status = h("span", { class: "live" });
  const message = h("div", {});
  const body = h("div", {});
  const choice = h("select", { id: "span", onchange: (e) => { location.hash = `#/upcoming?span=${e.target.value}`; } },
    Object.entries(SPANS).map(([key, s]) => h("option", { value: key, selected: key === span }, s.label)));
  let fetched = 0;
  const draw = async () => {
    if (Date.now() - fetched < REFRESH_MS) return;
    const answer = await get(`/schedules/upcoming?window=${SPANS[span].window}&bucket=${SPANS[span].bucket}`);
    fetched = Date.now();
    const palette = colours(answer.teams);
    body.replaceChildren(summary(answer, palette), h("div", { class: "card", id: "herd" }, bars(answer, palette)),
      h("h2", {}, "Busiest buckets"), busiest(answer, palette));
  };
  view.replaceChildren(h("h1", {}, "Upcoming fires", status),
    h("div", { class: "filters" }, h("label", {}, "Window", choice)), message, body);
  return live(draw, status).catch((e) => showError(message, e));
}
