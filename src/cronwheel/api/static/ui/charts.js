// A job's lateness and duration over its history: its last HISTORY runs (one read of the job's runs,
// made again every REREAD_MS, the page's own newest runs on top of it at every poll), oldest left,
// start lateness and duration on one axis of seconds, failed runs marked, and a tooltip (the run
// under the pointer).

import { get } from "./api.js";
import { h, seconds, svgNode } from "./dom.js";

export const HISTORY = 500;
const REREAD_MS = 10000;
const SIZE = { width: 720, height: 180, left: 48, right: 8, top: 8, bottom: 22 };

let held = { jobId: null, at: 0, runs: [], key: null, card: null }; // the last read, and the last card

const signature = (runs) => runs.map((r) => `${r.id}/${r.state}`).join(" ");

// The page's newest runs (read at every poll) before the older ones of the last read, newest first.
async function history(jobId, recent) {
  if (held.jobId !== jobId || Date.now() - held.at >= REREAD_MS) {
    const page = await get(`/jobs/${encodeURIComponent(jobId)}/runs?limit=${HISTORY}`);
    held = { jobId, at: Date.now(), runs: page.items, key: null, card: null };
  }
  const fresh = new Set(recent.map((r) => r.id));
  const oldest = recent.length ? recent[recent.length - 1].slot : null;
  const older = held.runs.filter((r) => !fresh.has(r.id) && (oldest === null || r.slot <= oldest));
  return [...recent, ...older].slice(0, HISTORY);
}

// The runs that started and finished, oldest first, as points.
function points(runs) {
  return runs.filter((r) => r.started_at && r.finished_at).reverse().map((r) => ({
    run: r,
    late: Math.max(0, r.start_lateness_s || 0),
    took: Math.max(0, (new Date(r.finished_at) - new Date(r.started_at)) / 1000),
  }));
}

function frame(top, shown) {
  const { width, height, left, bottom } = SIZE;
  const y = (value) => SIZE.top + (1 - value / top) * (height - SIZE.top - bottom);
  const marks = [svgNode("line", { x1: left, y1: height - bottom, x2: width - SIZE.right, y2: height - bottom, class: "axis" }),
    svgNode("line", { x1: left, y1: SIZE.top, x2: left, y2: height - bottom, class: "axis" })];
  for (const value of [0, top / 2, top]) {
    const text = value >= 100 ? Math.round(value) : +value.toPrecision(2);
    marks.push(svgNode("text", { x: left - 4, y: y(value) + 3, "text-anchor": "end", class: "tick" }, `${text} s`));
  }
  const day = (p) => p.run.slot.slice(0, 16).replace("T", " ");
  marks.push(svgNode("text", { x: left, y: height - 6, class: "tick" }, day(shown[0])),
    svgNode("text", { x: width - SIZE.right, y: height - 6, "text-anchor": "end", class: "tick" }, day(shown[shown.length - 1])));
  return marks;
}

function tipText(p) {
  return `${p.run.slot.replace("T", " ").slice(0, 19)} UTC · ${p.run.state} · start lateness ${seconds(p.late)} · duration ${seconds(p.took)}`;
}

function draw(shown, tip) {
  const { width, height, left, right, bottom } = SIZE;
  const top = Math.max(0.001, ...shown.map((p) => Math.max(p.late, p.took)));
  const x = (i) => left + (i * (width - left - right)) / Math.max(1, shown.length - 1);
  const y = (value) => SIZE.top + (1 - value / top) * (height - SIZE.top - bottom);
  const line = (key) => svgNode("polyline", { class: key, points: shown.map((p, i) => `${x(i)},${y(p[key])}`).join(" ") });
  const cursor = svgNode("line", { class: "cursor", x1: -10, x2: -10, y1: SIZE.top, y2: height - bottom });
  const root = svgNode("svg", { viewBox: `0 0 ${width} ${height}`, class: "history", role: "img", "aria-label": "start lateness and duration of the job's runs" });
  root.append(...frame(top, shown), line("late"), line("took"), cursor,
    ...shown.flatMap((p, i) => (p.run.state === "FAILED" ? [svgNode("circle", { cx: x(i), cy: y(p.took), r: 2.5, class: "state-FAILED" })] : [])));
  root.addEventListener("mousemove", (event) => {
    const box = root.getBoundingClientRect();
    const at = ((event.clientX - box.left) / box.width) * width;
    const i = Math.min(shown.length - 1, Math.max(0, Math.round(((at - left) / (width - left - right)) * (shown.length - 1))));
    cursor.setAttribute("x1", x(i));
    cursor.setAttribute("x2", x(i));
    root.dataset.run = shown[i].run.id;
    tip.textContent = tipText(shown[i]);
  });
  return root;
}

// The chart's card (id "chart") for the job `jobId`, whose newest runs the page holds (`recent`).
// The same card while the runs are the same (a pointer's tooltip survives the page's polls).
export async function historyChart(jobId, recent) {
  const runs = await history(jobId, recent);
  const key = `${held.at} ${signature(recent)}`;
  if (held.key !== key) [held.key, held.card] = [key, card(runs)];
  return held.card;
}

function card(runs) {
  const shown = points(runs);
  if (shown.length < 2) return h("p", { class: "muted", id: "chart" }, "A chart of lateness and duration appears after two finished runs.");
  const tip = h("p", { class: "chart-tip", id: "chart-tip" }, "Point at the chart for a run.");
  const skipped = runs.length - shown.length;
  return h("div", { class: "card", id: "chart" }, draw(shown, tip), tip,
    h("p", { class: "legend" }, h("span", { class: "late" }, "■ start lateness"), " ", h("span", { class: "took" }, "■ duration"),
      ` · last ${shown.length} finished runs of ${runs.length} read${skipped ? ` (${skipped} not run or unfinished)` : ""}`));
}
