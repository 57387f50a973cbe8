// The cronwheel dashboard: hash routes (#/jobs, #/jobs/ID, #/runs/ID, #/new, #/edit/ID, #/cluster),
// each a page drawn from the /v1 API through the session bridge (api.js) and redrawn by short polling.
// Text from the server is only ever put in the page as text (h() below), never as HTML.

import { Problem, api, currentSession, get, login, logout, whenLoggedOut } from "./api.js";

const POLL_MS = 2000;
const PAGE_SIZE = 50;
const RUN_STATES = ["PENDING", "RUNNING", "RETRYING", "SUCCESS", "FAILED", "SKIPPED"];
const view = document.getElementById("view");
let generation = 0; // bumped at each navigation: a stale page's poll stops
let session = null;

// -- DOM helpers ---------------------------------------------------------------------------------

function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "class") node.className = value;
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

const badge = (text, cls) => h("span", { class: `badge ${cls}` }, text);
const stateBadge = (state) => (state ? badge(state, `state-${state}`) : h("span", { class: "muted" }, "never ran"));

function when(iso) {
  if (!iso) return h("span", { class: "muted" }, "—");
  const date = new Date(iso);
  return h("time", { datetime: iso, title: iso }, `${date.toISOString().replace("T", " ").slice(0, 19)} UTC (${ago(date)})`);
}

// A job with no slot left (a one-time job that fired, an end_at that passed) is complete.
function nextRun(paused, next) {
  if (paused) return h("span", { class: "muted" }, "paused");
  return next ? when(next) : h("span", { class: "muted" }, "complete");
}

function ago(date) {
  const s = Math.round((date.getTime() - Date.now()) / 1000);
  const abs = Math.abs(s);
  if (abs < 2) return "now";
  const text = abs < 60 ? `${abs} s` : abs < 3600 ? `${Math.round(abs / 60)} min` : abs < 86400 ? `${Math.round(abs / 3600)} h` : `${Math.round(abs / 86400)} d`;
  return s >= 0 ? `in ${text}` : `${text} ago`;
}

const seconds = (value) => (value === null || value === undefined ? "—" : `${value.toFixed(3)} s`);

function kv(pairs) {
  return h("dl", { class: "kv" }, pairs.flatMap(([key, value]) => [h("dt", {}, key), h("dd", {}, value)]));
}

function table(headers, rows, attrs = {}) {
  return h("table", attrs, h("thead", {}, h("tr", {}, headers.map((name) => h("th", {}, name)))), h("tbody", {}, rows));
}

function showError(where, error) {
  const text = error instanceof Problem ? error.describe() : error.message || String(error);
  where.replaceChildren(h("div", { class: "error", role: "alert" }, text));
}

function confirmDialog(text) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.returnValue = "cancel";
    dialog.showModal();
  });
}

// Redraws `draw` every POLL_MS while this page is shown (and the tab is visible).
function live(draw, status) {
  const mine = generation;
  const tick = async () => {
    if (mine !== generation || !session) return;
    if (!document.hidden) {
      try {
        await draw();
        if (status) status.textContent = `live · updated ${new Date().toLocaleTimeString()}`;
      } catch (error) {
        if (status) status.textContent = `live · ${error.message}`;
      }
    }
    if (mine === generation) setTimeout(tick, POLL_MS);
  };
  return tick();
}

// -- login -----------------------------------------------------------------------------------------

function showLogin(message, kind = "error") {
  session = null;
  generation += 1;
  document.getElementById("nav").hidden = true;
  document.getElementById("logout").hidden = true;
  document.getElementById("whoami").textContent = "";
  const error = h("div", {});
  if (message) error.append(h("div", { class: kind, role: kind === "error" ? "alert" : "status" }, message));
  const input = h("input", { id: "token", type: "password", autocomplete: "off", placeholder: "cw_… or a JWT", required: true });
  const form = h(
    "form",
    { class: "login", id: "login-form" },
    h("h1", {}, "Log in to cronwheel"),
    h("p", { class: "muted" }, "Paste an API token (", h("code", {}, "cronwheel server"), " makes one at first start, in ",
      h("code", {}, "cronwheel.db.token"), "; ", h("code", {}, "cronwheel tokens create"), " makes more) or your identity provider's token."),
    h("label", { for: "token" }, "Token"),
    input,
    error,
    h("button", { class: "primary", type: "submit", id: "login-button" }, "Log in"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const opened = await login(input.value.trim());
      input.value = "";
      loggedIn(opened);
    } catch (problem) {
      showError(error, problem.status === 401 ? new Error(`Refused: ${problem.message}`) : problem);
    }
  });
  view.replaceChildren(form);
  input.focus();
}

function loggedIn(opened) {
  session = opened;
  const caller = opened.caller;
  const teams = caller.teams === null ? "every team" : caller.teams.join(", ");
  document.getElementById("whoami").textContent = `${caller.name} · ${teams} · ${caller.scopes.join(", ")}`;
  document.getElementById("nav").hidden = false;
  document.getElementById("logout").hidden = false;
  route();
}

// -- jobs ------------------------------------------------------------------------------------------

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

const svgNode = (tag, attrs = {}, ...children) => {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  node.append(...children);
  return node;
};

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

function status(job) {
  if (job.paused) return badge("paused", "paused");
  return job.late ? badge("late", "late-job") : badge("active", "active-job");
}

function jobRow(job) {
  const last = job.last_run;
  return h(
    "tr",
    { "data-job": job.id, "data-late": job.late ? "true" : "false" },
    h("td", {}, h("a", { href: `#/jobs/${encodeURIComponent(job.id)}` }, job.name)),
    h("td", {}, job.team),
    h("td", {}, status(job)),
    h("td", { class: "schedule" }, h("div", { class: "words" }, job.schedule_description), h("code", {}, job.schedule)),
    h("td", {}, job.timezone),
    h("td", {}, nextRun(job.paused, job.next_run_at)),
    h("td", { class: "last" }, last ? [stateBadge(last.state), " ", h("a", { href: `#/runs/${encodeURIComponent(last.id)}` }, when(last.finished_at || last.slot))] : stateBadge(null)),
    h("td", { class: "recent" }, sparkline(job.recent)),
    h("td", {}, Object.entries(job.labels || {}).map(([k, v]) => badge(`${k}=${v}`, "")))
  );
}

function jobsPage(params) {
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
  return live(draw, status).catch((e) => showError(message, e));
}

// -- one job ---------------------------------------------------------------------------------------

function runRow(run) {
  return h(
    "tr",
    { "data-run": run.id, "data-state": run.state },
    h("td", {}, h("a", { href: `#/runs/${encodeURIComponent(run.id)}` }, run.id)),
    h("td", {}, run.kind),
    h("td", {}, when(run.slot)),
    h("td", {}, stateBadge(run.state)),
    h("td", { class: "num" }, run.attempts),
    h("td", { class: "num" }, seconds(run.start_lateness_s)),
    h("td", {}, when(run.finished_at)),
    h("td", {}, run.reason || "")
  );
}

// Start lateness and duration of the runs shown (oldest left), as an SVG line chart.
function chart(runs) {
  const points = runs.filter((r) => r.started_at && r.finished_at).reverse().map((r) => ({
    late: Math.max(0, r.start_lateness_s || 0),
    took: (new Date(r.finished_at) - new Date(r.started_at)) / 1000,
  }));
  if (points.length < 2) return h("p", { class: "muted" }, "A chart of lateness and duration appears after two finished runs.");
  const [width, height, pad] = [560, 120, 4];
  const top = Math.max(0.001, ...points.map((p) => Math.max(p.late, p.took)));
  const line = (key, cls) => svgNode("polyline", {
    class: cls, fill: "none",
    points: points.map((p, i) => `${pad + (i * (width - 2 * pad)) / (points.length - 1)},${height - pad - (p[key] / top) * (height - 2 * pad)}`).join(" "),
  });
  const root = svgNode("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart", role: "img", "aria-label": "start lateness and duration of recent runs" });
  root.append(line("late", "late"), line("took", "took"));
  return h("div", { class: "card", id: "chart" }, root,
    h("p", { class: "legend" }, h("span", { class: "late" }, "■ start lateness"), " ", h("span", { class: "took" }, "■ duration"), ` · top ${seconds(top)} · last ${points.length} runs`));
}

function definition(job) {
  const { id, version, paused, pause_note, paused_at, created_at, updated_at, next_run_at, next_fire_at, last_run, plain_values, schedule_description, late, recent, ...spec } = job;
  return h(
    "div",
    { class: "card" },
    kv([
      ["Team", job.team],
      ["Status", paused ? [badge("paused", "paused"), " ", pause_note || "", " ", paused_at ? when(paused_at) : ""] : status(job)],
      ["Schedule", [h("div", { class: "words", id: "job-words" }, schedule_description), h("code", {}, job.schedule)]],
      ["Time zone", job.timezone],
      ["Calendars", h("span", { id: "job-calendars" }, calendarsText(job))],
      ["Next run", [nextRun(paused, next_run_at), !paused && next_fire_at && next_fire_at !== next_run_at ? ` (fires ${when(next_fire_at)})` : ""]],
      ["Jitter", job.jitter_s ? h("span", { id: "job-jitter" }, `up to ${job.jitter_s} s after each slot (offset fixed by job id and slot)`) : h("span", { class: "muted" }, "none")],
      ...(/^\s*@at\s/i.test(job.schedule) ? [["After success", job.delete_after_success  // one-time jobs only
        ? h("span", { id: "delete-after-success" }, "deleted (its one run's success deletes the job)")
        : h("span", { class: "muted" }, "kept")]] : []),
      ["Target", targetSummary(job.target)],
      ["Version", version],
      ["Description", job.description || h("span", { class: "muted" }, "—")],
    ]),
    h("h2", {}, "Definition"),
    h("pre", { id: "definition" }, JSON.stringify(spec, null, 2))
  );
}

// One line per target kind: where it goes (the fields of the API's target specs).
function targetSummary(target) {
  const where = {
    http: () => `${target.method || "POST"} ${target.url}`,
    command: () => (target.argv || []).join(" "),
    python: () => target.function,
    grpc: () => `${target.address} ${target.method}`,
    nats: () => `${target.url} ${target.subject}`,
    mqtt: () => `${target.url} ${target.topic}`,
    rabbitmq: () => `${target.url} ${target.exchange || "(default exchange)"} ${target.routing_key}`,
    kafka: () => `${(target.bootstrap_servers || []).join(",")} ${target.topic}`,
  }[target.type];
  return `${target.type} ${where ? where() : ""}`.trim();
}

async function upcoming(job) {
  const preview = (await api("POST", "/schedules/preview", {
    expression: job.schedule, timezone: job.timezone, count: 8, seed: job.id,
    ...(job.dst_gap ? { dst_gap: job.dst_gap } : {}), ...(job.dst_fold ? { dst_fold: job.dst_fold } : {}),
    ...((job.calendars || []).length ? { team: job.team, calendars: job.calendars, calendar_shift: job.calendar_shift } : {}),
  })).body;
  return h(
    "div",
    { class: "card", id: "upcoming" },
    h("ul", {}, preview.fires.map((fire) => h("li", { class: fire.calendar === "skipped" ? "skipped" : "" }, when(fire.utc), " · ", fire.at,
      fire.kind !== "normal" ? h("span", { class: "dst" }, ` (DST: ${fire.kind})`) : "", calendarMark(job, fire)))),
    preview.warnings.map((w) => h("p", { class: "muted" }, w))
  );
}

// What a job's calendars do to one fire of the preview: skipped (recorded SKIPPED, reason calendar)
// or shifted here from a skipped slot.
function calendarMark(job, fire) {
  if (fire.calendar === "skipped") return h("span", { class: "calendar" }, ` (skipped: calendar ${(job.calendars || []).join(", ")})`);
  if (fire.calendar === "shifted") return h("span", { class: "calendar" }, ` (shifted from ${when(fire.shifted_from)})`);
  return "";
}

function calendarsText(job) {
  const names = job.calendars || [];
  if (!names.length) return h("span", { class: "muted" }, "—");
  const shift = job.calendar_shift && job.calendar_shift !== "none" ? ` (shift to the ${job.calendar_shift} open day)` : "";
  return names.join(", ") + shift;
}

function actions(job, message, redraw) {
  const act = async (method, path, body, done) => {
    try {
      await api(method, path, body);
      message.replaceChildren(h("div", { class: "notice", role: "status" }, done));
      await redraw();
    } catch (error) {
      showError(message, error);
    }
  };
  const jobPath = `/jobs/${encodeURIComponent(job.id)}`;
  const note = h("input", { id: "pause-note", placeholder: "why (optional)", size: 24 });
  return h(
    "div",
    { class: "actions" },
    job.paused
      ? h("button", { id: "resume", type: "button", onclick: () => act("POST", `${jobPath}/resume`, {}, "Resumed.") }, "Resume")
      : [h("label", {}, "Pause note", note), h("button", { id: "pause", type: "button", onclick: () => act("POST", `${jobPath}/pause`, note.value ? { note: note.value } : {}, "Paused.") }, "Pause")],
    h("button", { id: "trigger", type: "button", class: "primary", onclick: () => act("POST", `${jobPath}/trigger`, {}, "Triggered: a run is queued.") }, "Trigger now"),
    h("a", { href: `#/edit/${encodeURIComponent(job.id)}` }, h("button", { type: "button", id: "edit" }, "Edit")),
    h("button", {
      id: "delete", type: "button", class: "danger",
      onclick: async () => {
        if (!(await confirmDialog(`Delete job ${job.team}/${job.name}? Its runs stay readable.`))) return;
        try {
          await api("DELETE", jobPath);
          location.hash = "#/jobs";
        } catch (error) {
          showError(message, error);
        }
      },
    }, "Delete")
  );
}

// A job's backfills: each with a bar of the slots decided (created, or found with a run) of its
// total, and a running one with a Cancel button (the runs it created stay).
function backfillRow(backfill, cancel) {
  const decided = backfill.created + backfill.existing;
  return h(
    "tr",
    { "data-backfill": backfill.id, "data-state": backfill.state },
    h("td", {}, when(backfill.from)),
    h("td", {}, when(backfill.to)),
    h("td", {}, badge(backfill.state, `backfill-${backfill.state}`)),
    h("td", {}, h("progress", { max: Math.max(1, backfill.total), value: decided }), ` ${decided}/${backfill.total} slots`),
    h("td", {}, String(backfill.created)),
    h("td", {}, String(backfill.existing)),
    h("td", {}, when(backfill.next_slot)),
    h("td", {}, backfill.state === "running"
      ? h("button", { type: "button", class: "danger", "data-cancel-backfill": backfill.id, onclick: () => cancel(backfill) }, "Cancel")
      : "")
  );
}

// Cancel a running backfill: the backfiller creates no more runs for it.
function backfillCanceller(job, message, redraw) {
  return async (backfill) => {
    if (!(await confirmDialog(`Cancel this backfill? The ${backfill.created} runs it created stay; the ${backfill.remaining} slots left get none.`))) return;
    try {
      const path = `/jobs/${encodeURIComponent(job.id)}/backfills/${encodeURIComponent(backfill.id)}/cancel`;
      const answer = (await api("POST", path, {})).body;
      message.replaceChildren(h("div", { class: "notice", role: "status" }, `Backfill cancelled: ${answer.created} runs created, ${answer.remaining} slots left without one.`));
      await redraw();
    } catch (error) {
      showError(message, error);
    }
  };
}

// Backfill a range of past slots, or see first what it would do (a dry run writes nothing).
function backfillForm(job, message, redraw) {
  const from = h("input", { id: "backfill-from", placeholder: "from, RFC 3339", size: 22 });
  const to = h("input", { id: "backfill-to", placeholder: "to, RFC 3339", size: 22 });
  const confirm = h("input", { id: "backfill-confirm", type: "checkbox" });
  const send = async (dryRun) => {
    const body = { from: from.value, to: to.value, dry_run: dryRun, confirm: confirm.checked };
    try {
      const answer = (await api("POST", `/jobs/${encodeURIComponent(job.id)}/backfills`, body)).body;
      const done = dryRun
        ? `Dry run: ${answer.create.length} of ${answer.total} slots would get a run; ${answer.existing.length} have one.`
        : `Backfill accepted: ${answer.total} slots.`;
      message.replaceChildren(h("div", { class: "notice", role: "status" }, done));
      await redraw();
    } catch (error) {
      showError(message, error);
    }
  };
  return h(
    "div",
    { class: "actions", id: "backfill-form" },
    h("label", {}, "Backfill from", from),
    h("label", {}, "to", to),
    h("label", {}, confirm, " confirm a large range"),
    h("button", { id: "backfill-dry-run", type: "button", onclick: () => send(true) }, "Dry run"),
    h("button", { id: "backfill-start", type: "button", onclick: () => send(false) }, "Backfill")
  );
}

function jobPage(jobId) {
  const status = h("span", { class: "live" });
  const title = h("h1", {}, "Job", status);
  const message = h("div", {});
  const buttons = h("div", {});
  const top = h("div", {});
  const runs = h("tbody", {});
  const backfills = h("tbody", {});
  let shownVersion = null;
  const draw = async () => {
    const job = await get(`/jobs/${encodeURIComponent(jobId)}`);
    const page = await get(`/jobs/${encodeURIComponent(jobId)}/runs?limit=25`);
    const filled = await get(`/jobs/${encodeURIComponent(jobId)}/backfills?limit=10`);
    const next = await upcoming(job);
    title.firstChild.textContent = `Job ${job.team}/${job.name} `;
    if (shownVersion !== `${job.version}/${job.paused}`) {  // keep a note being typed across polls
      shownVersion = `${job.version}/${job.paused}`;
      buttons.replaceChildren(actions(job, message, draw), backfillForm(job, message, draw));
    }
    top.replaceChildren(h("div", { class: "grid" }, definition(job), h("div", {}, h("h2", {}, "Upcoming fire times"), next, h("h2", {}, "Lateness and duration"), chart(page.items))));
    runs.replaceChildren(...(page.items.length ? page.items.map(runRow) : [h("tr", {}, h("td", { colspan: 8, class: "muted" }, "No runs yet."))]));
    const cancel = backfillCanceller(job, message, draw);
    backfills.replaceChildren(...(filled.items.length ? filled.items.map((b) => backfillRow(b, cancel)) : [h("tr", {}, h("td", { colspan: 8, class: "muted" }, "No backfills."))]));
  };
  const backfillTable = h("table", { id: "backfills" }, h("thead", {}, h("tr", {}, ["From", "To", "State", "Progress", "Created", "Had runs", "Next slot", ""].map((t) => h("th", {}, t)))), backfills);
  view.replaceChildren(title, message, buttons, top, h("h2", {}, "Backfills"), backfillTable, h("h2", {}, "Run history"), h("table", { id: "runs" }, h("thead", {}, h("tr", {}, ["Run", "Kind", "Slot", "State", "Attempts", "Start lateness", "Finished", "Reason"].map((t) => h("th", {}, t)))), runs));
  return live(draw, status).catch((e) => showError(message, e));
}

// -- create / edit ---------------------------------------------------------------------------------

// The form's fields: [key, label, kind]; kind "json" is a JSON value in a text area, an array is a
// choice ("" = the server's default, sent as null). Every field of the definition is here.
const FIELDS = [
  ["team", "Team", "text"], ["name", "Name", "text"], ["schedule", "Schedule (cron)", "text"],
  ["timezone", "Time zone", "text"], ["dst_gap", "DST gap", ["", "shift", "skip"]],
  ["dst_fold", "DST repeated time", ["", "first", "last", "both"]], ["description", "Description", "text"],
  ["timeout_s", "Timeout (s)", "number"], ["overlap", "Overlap", ["allow", "forbid", "replace"]],
  ["jitter_s", "Jitter (s)", "number"],
  ["queue", "Queue", "text"], ["start_at", "Start at (RFC 3339)", "text"], ["end_at", "End at (RFC 3339)", "text"],
  ["target", "Target", "json"], ["retry", "Retry", "json"], ["misfire", "Misfire", "json"],
  ["labels", "Labels", "json"], ["payload", "Payload", "json"], ["retention", "Retention", "json"],
  ["delete_after_success", "Delete after success (@at only)", "checkbox"],
  ["calendars", "Calendars (names)", "json"], ["calendar_shift", "Calendar shift", ["none", "next", "previous"]],
];
const EDITABLE = FIELDS.map(([key]) => key);
const NULLABLE = new Set(["dst_gap", "dst_fold", "start_at", "end_at"]);
const VALIDATE_MS = 300;

function fieldInput(key, kind, value) {
  const id = `field-${key}`;
  if (Array.isArray(kind)) {
    return h("select", { id, name: key }, kind.map((choice) => h("option", { value: choice, selected: (value ?? "") === choice }, choice || "default")));
  }
  if (kind === "checkbox") return h("input", { id, name: key, type: "checkbox", checked: Boolean(value) });
  if (kind === "json") return h("textarea", { id, name: key, spellcheck: "false", rows: key === "target" ? 6 : 3 }, JSON.stringify(value ?? null, null, 2));
  return h("input", { id, name: key, type: kind, step: kind === "number" ? "any" : undefined, value: value ?? "", spellcheck: "false" });
}

// The definition the form holds, and the fields that are not JSON ({key: message}).
function formSpec(form) {
  const spec = {};
  const unreadable = {};
  for (const [key, , kind] of FIELDS) {
    const raw = form.elements[key].value;
    if (kind === "json") {
      try {
        spec[key] = JSON.parse(raw);
      } catch (error) {
        unreadable[key] = `not JSON: ${error.message}`;
      }
    } else if (kind === "checkbox") spec[key] = form.elements[key].checked;
    else if (kind === "number") spec[key] = raw === "" ? null : Number(raw);
    else if (raw === "" && NULLABLE.has(key)) spec[key] = null;
    else spec[key] = raw;
  }
  return { spec, unreadable };
}

// Each refused field's message under that field (a nested one, target.url, under its top field);
// the rest, and the problem's detail when no field is named, above the Save button.
function showFieldErrors(form, general, errors, detail) {
  for (const slot of form.querySelectorAll(".field-error")) slot.replaceChildren();
  for (const field of form.querySelectorAll(".field")) field.classList.remove("invalid");
  const left = [];
  for (const [path, message] of errors) {
    const key = String(path || "").split(".")[0];
    const slot = form.querySelector(`.field-error[data-for="${CSS.escape(key)}"]`);
    if (!slot) { left.push(path ? `${path}: ${message}` : message); continue; }
    slot.append(h("div", {}, path === key ? message : `${path}: ${message}`));
    slot.closest(".field").classList.add("invalid");
  }
  if (!errors.length && detail) left.push(detail);
  general.replaceChildren(...(left.length ? [h("div", { class: "error", role: "alert" }, left.join("\n"))] : []));
}

const problemErrors = (problem) => (problem.body.errors || []).map((e) => [e.field, e.message || e.detail || ""]);

function editor(title, initial, validatePath, save) {
  const general = h("div", { id: "form-errors" });
  const words = h("div", { class: "words", id: "schedule-words" });
  const fires = h("div", { class: "muted", id: "schedule-check" });
  const fields = FIELDS.map(([key, label, kind]) => h("div", { class: `field field-${kind === "json" ? "json" : "plain"}`, "data-field": key },
    h("label", { for: `field-${key}` }, label), fieldInput(key, kind, initial[key]),
    h("div", { class: "field-error", "data-for": key, id: `error-${key}`, role: "alert" })));
  const form = h("form", { id: "job-form", novalidate: true },
    h("div", { class: "fields" }, fields),
    h("div", { class: "card explain" }, h("strong", {}, "Schedule: "), words, fires),
    general,
    h("button", { class: "primary", type: "submit", id: "save" }, "Save"));
  let asked = 0; // answers to older keystrokes than the last are dropped
  const validate = async () => {
    const mine = ++asked;
    const { spec, unreadable } = formSpec(form);
    if (Object.keys(unreadable).length) { showFieldErrors(form, general, Object.entries(unreadable)); return; }
    try {
      const checked = (await api("POST", validatePath, spec)).body;
      if (mine !== asked) return;
      showFieldErrors(form, general, []);
      words.textContent = checked.schedule_description;
      fires.replaceChildren("Next: ", checked.fires.map((f) => f.at + (f.kind !== "normal" ? ` (DST: ${f.kind})` : "")).join(", ") || "none",
        ...checked.warnings.map((w) => h("div", {}, `⚠ ${w}`)));
      form.dataset.valid = "true";
    } catch (error) {
      if (mine !== asked) return;
      form.dataset.valid = "false";
      if (!(error instanceof Problem)) { showFieldErrors(form, general, [], error.message); return; }
      showFieldErrors(form, general, problemErrors(error), error.message);
      if (problemErrors(error).some(([path]) => ["schedule", "timezone", "dst_gap", "dst_fold"].includes(String(path)))) {
        words.textContent = "—";
        fires.replaceChildren();
      }
    }
  };
  let pending = null;
  const soon = () => { clearTimeout(pending); pending = setTimeout(validate, VALIDATE_MS); };
  form.addEventListener("input", soon);
  form.addEventListener("change", soon);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearTimeout(pending);
    const { spec, unreadable } = formSpec(form);
    if (Object.keys(unreadable).length) { showFieldErrors(form, general, Object.entries(unreadable)); return; }
    try {
      const job = await save(spec);
      location.hash = `#/jobs/${encodeURIComponent(job.id)}`;
    } catch (error) {
      if (error instanceof Problem) showFieldErrors(form, general, problemErrors(error), error.describe());
      else showError(general, error);
    }
  });
  view.replaceChildren(h("h1", {}, title),
    h("p", { class: "muted" }, "Checked by the API as you type (the same checks as saving, nothing is written); each refused field says why under it."), form);
  validate();
}

function newJobPage() {
  const team = session.caller.teams && session.caller.teams.length ? session.caller.teams[0] : "default";
  const initial = { team, name: "", schedule: "*/5 * * * *", timezone: "UTC", overlap: "allow", jitter_s: 0, queue: "default", timeout_s: 60,
    target: { type: "http", url: "https://example.com/hook", method: "POST" }, retry: { max_attempts: 1 }, misfire: { policy: "skip" }, labels: {}, payload: null, retention: null, delete_after_success: false,
    calendars: [], calendar_shift: "none" };
  editor("New job", initial, "/jobs:validate", async (spec) => (await api("POST", "/jobs", spec)).body);
}

async function editPage(jobId) {
  const { body: job, headers } = await api("GET", `/jobs/${encodeURIComponent(jobId)}`);
  const spec = Object.fromEntries(EDITABLE.filter((key) => key in job).map((key) => [key, job[key]]));
  const path = `/jobs/${encodeURIComponent(jobId)}`;
  editor(`Edit ${job.team}/${job.name}`, spec, `${path}/validate`,
    async (changed) => (await api("PUT", path, changed, { "If-Match": headers.get("ETag") || `"${job.version}"` })).body);
}

// -- one run ---------------------------------------------------------------------------------------

// the headers an HTTP attempt sent, credentials already "[redacted]" by the worker (a <pre>, not
// a <details>: the page redraws every few seconds, which would close it)
function sentHeaders(headers) {
  const names = Object.keys(headers || {});
  if (!names.length) return h("span", { class: "muted" }, "—");
  return h("pre", {}, names.map((name) => `${name}: ${headers[name]}`).join("\n"));
}

function runPage(runId) {
  const status = h("span", { class: "live" });
  const message = h("div", {});
  const body = h("div", {});
  const draw = async () => {
    const run = await get(`/runs/${encodeURIComponent(runId)}`);
    body.replaceChildren(
      h("div", { class: "card" }, kv([
        ["Job", run.job_name ? h("a", { href: `#/jobs/${encodeURIComponent(run.job_id)}` }, `${run.job_team}/${run.job_name}`) : `${run.job_id} (deleted)`],
        ["State", [stateBadge(run.state), run.reason ? ` ${run.reason}` : ""]],
        ["Kind", run.kind],
        ["Slot", when(run.slot)],
        ["Fires at", run.due_at ? when(run.due_at) : h("span", { class: "muted" }, "the slot (no jitter)")],
        ["Queued", [when(run.queued_at), ` (lateness ${seconds(run.queued_lateness_s)})`]],
        ["Started", [when(run.started_at), ` (lateness ${seconds(run.start_lateness_s)})`]],
        ["Finished", when(run.finished_at)],
        ["Next attempt", when(run.next_attempt_at)],
        ["Queue", run.queue],
        ["Trace", run.trace_id ? h("code", { id: "trace-id" }, run.trace_id) : "— (tracing off when it ran)"],
      ])),
      h("h2", {}, "Attempts"),
      table(["#", "Worker", "Started", "Took", "Outcome", "Status / exit", "Error", "Output", "Headers sent"], run.attempt_details.map((a) => h("tr", { "data-attempt": a.number },
        h("td", { class: "num" }, a.number), h("td", {}, a.worker), h("td", {}, when(a.started_at)),
        h("td", { class: "num" }, a.finished_at ? seconds((new Date(a.finished_at) - new Date(a.started_at)) / 1000) : "running"),
        h("td", {}, a.outcome || "—"), h("td", {}, a.status_code ?? a.exit_code ?? "—"), h("td", {}, a.error || ""),
        h("td", {}, a.output ? h("pre", {}, a.output) : h("span", { class: "muted" }, "—")),
        h("td", { class: "headers" }, sentHeaders(a.request_headers)))), { id: "attempts" }),
      h("h2", {}, "Events"),
      table(["At", "State", "From", "Attempt", "Node", "Detail"], run.events.map((e) => h("tr", {},
        h("td", {}, when(e.at)), h("td", {}, stateBadge(e.state)), h("td", {}, e.previous || "—"), h("td", { class: "num" }, e.attempt), h("td", {}, e.node || "—"), h("td", {}, e.detail || ""))), { id: "events" })
    );
  };
  view.replaceChildren(h("h1", {}, `Run ${runId}`, status), message, body);
  return live(draw, status).catch((e) => showError(message, e));
}

// -- cluster ---------------------------------------------------------------------------------------

function clusterPage() {
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

// -- routing ---------------------------------------------------------------------------------------

function route() {
  if (!session) return;
  generation += 1;
  const [path, query] = (location.hash.slice(1) || "/jobs").split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  for (const link of document.querySelectorAll("[data-nav]")) link.classList.toggle("active", link.dataset.nav === parts[0]);
  const pages = {
    jobs: () => (parts[1] ? jobPage(parts[1]) : jobsPage(params)),
    runs: () => runPage(parts[1]),
    new: () => newJobPage(),
    edit: () => editPage(parts[1]).catch((e) => showError(view, e)),
    cluster: () => clusterPage(),
  };
  (pages[parts[0]] || pages.jobs)();
}

whenLoggedOut(() => showLogin("Your session ended: log in again."));
window.addEventListener("hashchange", route);
document.getElementById("logout").addEventListener("click", async () => {
  await logout();
  showLogin("Logged out.", "notice");
});

const opened = await currentSession().catch(() => null);
if (opened) loggedIn(opened);
else showLogin();
