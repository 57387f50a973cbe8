// The jobs page (#/jobs?filters): the jobs matching the filters, a page at a time, each with its
// status, schedule, next and last run and a sparkline of its recent runs.

import { get } from "../api.js";
import { badge, h, jobStatus, live, nextRun, showError, stateBadge, svgNode, view, when } from "../dom.js";

const PAGE_SIZE = 50;
const RUN_STATES = ["PENDING", "RUNNING", "RETRYING", "SUCCESS", "FAILED", "SKIPPED"];

function jobsQuery(params, cursor) {
  const query = new URLSearchParams();
  for (const key of ["team", "name", "paused", "last_state", "late"]) if (params.get(key)) query.set(key, params.get(key));
  for (const label of (params.get("label") || "").split(",").map((l) => l.trim()).filter(Boolean)) query.append("label", label);
  const limit = Number.parseInt(params.get("limit") || "", 10);
  query.set("limit", String(limit >= 1 && limit <= 1000 ? limit : PAGE_SIZE));
  query.set("include", "recent"); // each job's newest runs, for its sparkline: one read for the page
  if (cursor) query.set("cursor", cursor);
  return query.toString();
}

// A job's recent runs (the newest at the right edge): a bar per run for its duration (red when it failed, grey when
// skipped) and a line for its fire lateness, each scaled to its own largest value.
function sparkline(points) {
  if (!points || !points.length) return h("span", { class: "muted" }, "no runs");
  const [width, height, step] = [100, 24, 100 / 20];
  const start = (20 - Math.min(points.length, 20)) * step;
  const took = Math.max(1, ...points.map((p) => p.duration_ms || 0));
  const late = Math.max(1, ...points.map((p) => p.lateness_ms || 0));
  const bars = points.map((p, i) => {
    const tall = p.duration_ms ? Math.max(1, (p.duration_ms / took) * (height - 2)) : 1;
    return svgNode("rect", { x: start + i * step + 0.5, y: height - tall, width: step - 1, height: tall, class: `bar state-${p.state}` });
  });
  const line = svgNode("polyline", {
    class: "lateness", fill: "none",
    points: points.map((p, i) => `${start + i * step + step / 2},${height - 1 - ((p.lateness_ms || 0) / late) * (height - 2)}`).join(" "),
  });
  const worst = (key) => Math.max(...points.map((p) => p[key] || 0)) / 1000;
  const summary = `last ${points.length} runs: longest ${worst("duration_ms").toFixed(3)} s, latest fire ${worst("lateness_ms").toFixed(3)} s late`;
  return svgNode("svg", { viewBox: `0 0 ${width} ${height}`, class: "spark", role: "img", "aria-label": summary, "data-points": points.length },
    svgNode("title", {}, summary), ...bars, line);
}

function jobRow(job) {
  const last = job.last_run;
  return h(
    "tr",
    { "data-job": job.id, "data-late": job.late ? "true" : "false" },
    h("td", {}, h("a", { href: `#/jobs/${encodeURIComponent(job.id)}` }, job.name)),
    h("td", {}, job.team),
    h("td", {}, jobStatus(job)),
    h("td", { class: "schedule" }, h("div", { class: "words" }, job.schedule_description), h("code", {}, job.schedule)),
    h("td", {}, job.timezone),
    h("td", {}, nextRun(job.paused, job.next_run_at)),
    h("td", { class: "last" }, last ? [stateBadge(last.state), " ", h("a", { href: `#/runs/${encodeURIComponent(last.id)}` }, when(last.finished_at || last.slot))] : stateBadge(null)),
    h("td", { class: "recent" }, sparkline(job.recent)),
    h("td", {}, Object.entries(job.labels || {}).map(([k, v]) => badge(`${k}=${v}`, "")))
  );
}

export function jobsPage(params) {
  const cursors = [null]; // the cursor of each page seen so far: "previous" goes back one
  let next = null;
  const field = (name, attrs = {}) => h("input", { name, value: params.get(name) || "", ...attrs });
  const select = (name, options) =>
    h("select", { name }, options.map(([value, text]) => h("option", { value, selected: (params.get(name) || "") === value }, text)));
  const filters = h(
    "form",
    { class: "filters", id: "filters" },
    h("label", {}, "Team", field("team", { size: 12 })),
    h("label", {}, "Name", field("name", { size: 14 })),
    h("label", {}, "Labels (k=v, …)", field("label", { size: 18 })),
    h("label", {}, "Paused", select("paused", [["", "any"], ["true", "paused"], ["false", "active"]])),
    h("label", {}, "Last run", select("last_state", [["", "any"], ...RUN_STATES.map((s) => [s, s])])),
    h("label", {}, "Late", select("late", [["", "any"], ["true", "late only"]])),
    h("label", {}, "Per page", select("limit", [["", String(PAGE_SIZE)], ["100", "100"], ["200", "200"]])),
    h("button", { type: "submit" }, "Filter")
  );
  filters.addEventListener("submit", (event) => {
    event.preventDefault();
    const query = new URLSearchParams();
    for (const [key, value] of new FormData(filters)) if (value) query.set(key, value);
    location.hash = `#/jobs?${query}`;
  });
  const body = h("tbody", {});
  const message = h("div", {});
  const status = h("span", { class: "live" });
  const prev = h("button", { type: "button", id: "prev", disabled: true }, "← Previous");
  const nextButton = h("button", { type: "button", id: "next", disabled: true }, "Next →");
  const where = h("span", { class: "muted" });
  const draw = async () => {
    const page = await get(`/jobs?${jobsQuery(params, cursors[cursors.length - 1])}`);
    next = page.next_cursor;
    body.replaceChildren(...(page.items.length ? page.items.map(jobRow) : [h("tr", {}, h("td", { colspan: 9, class: "muted" }, "No jobs match."))]));
    prev.disabled = cursors.length === 1;
    nextButton.disabled = !next;
    where.textContent = `page ${cursors.length} · ${page.items.length} jobs`;
    message.replaceChildren();
  };
  prev.addEventListener("click", () => { cursors.pop(); draw().catch((e) => showError(message, e)); });
  nextButton.addEventListener("click", () => { if (next) { cursors.push(next); draw().catch((e) => showError(message, e)); } });
  const headers = ["Name", "Team", "Status", "Schedule", "Time zone", "Next run", "Last outcome", "Recent runs", "Labels"];
  const quick = h("p", { class: "quick" }, "Show: ",
    [["all", ""], ["failing", "last_state=FAILED"], ["late", "late=true"], ["paused", "paused=true"], ["retrying", "last_state=RETRYING"]]
      .map(([text, query]) => h("a", { href: `#/jobs?${query}`, "data-quick": text }, text))
      .flatMap((link, i) => (i ? [" · ", link] : [link])));
  view.replaceChildren(
    h("h1", {}, "Jobs", status),
    quick,
    filters,
    message,
    h("table", { id: "jobs" }, h("thead", {}, h("tr", {}, headers.map((t) => h("th", {}, t)))), body),
    h("div", { class: "pager" }, prev, nextButton, where)
  );
  return live(draw, status, ["jobs", "runs"]).catch((e) => showError(message, e));
}
