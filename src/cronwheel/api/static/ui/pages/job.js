// One job's page (#/jobs/ID): its definition, upcoming fire times, a chart of its runs' lateness
// and duration, the actions the caller may take (pause, resume, trigger, edit, delete, backfill:
// access.js), backfills and its whole run history, a page at a time by the API's cursor; a job the
// caller cannot see is a "not found" page.

import { can } from "../access.js";
import { api, get } from "../api.js";
import { historyChart } from "../charts.js";
import { badge, confirmDialog, h, jobStatus, kv, live, nextRun, showError, view, when } from "../dom.js";
import { cursorPager } from "../pager.js";
import { runHeaders, runRows } from "../runlist.js";
import { orMissing } from "./missing.js";

const HISTORY_PAGE = 25;

function definition(job) {
  const { id, version, paused, pause_note, paused_at, created_at, updated_at, next_run_at, next_fire_at, last_run, plain_values, schedule_description, late, recent, ...spec } = job;
  return h(
    "div",
    { class: "card" },
    kv([
      ["Team", job.team],
      ["Status", paused ? [badge("paused", "paused"), " ", pause_note || "", " ", paused_at ? when(paused_at) : ""] : jobStatus(job)],
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
  const remove = async () => {
    if (!(await confirmDialog(`Delete job ${job.team}/${job.name}? Its runs stay readable.`))) return;
    try {
      await api("DELETE", jobPath);
      location.hash = "#/jobs";
    } catch (error) {
      showError(message, error);
    }
  };
  return h(
    "div",
    { class: "actions" },
    job.paused
      ? can("resume") && h("button", { id: "resume", type: "button", onclick: () => act("POST", `${jobPath}/resume`, {}, "Resumed.") }, "Resume")
      : can("pause") && [h("label", {}, "Pause note", note), h("button", { id: "pause", type: "button", onclick: () => act("POST", `${jobPath}/pause`, note.value ? { note: note.value } : {}, "Paused.") }, "Pause")],
    can("trigger") && h("button", { id: "trigger", type: "button", class: "primary", onclick: () => act("POST", `${jobPath}/trigger`, {}, "Triggered: a run is queued.") }, "Trigger now"),
    can("edit") && h("a", { href: `#/edit/${encodeURIComponent(job.id)}` }, h("button", { type: "button", id: "edit" }, "Edit")),
    can("delete") && h("button", { id: "delete", type: "button", class: "danger", onclick: remove }, "Delete")
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
    h("td", {}, backfill.state === "running" && can("cancelBackfill")
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

export function jobPage(jobId) {
  const status = h("span", { class: "live" });
  const title = h("h1", {}, "Job", status);
  const message = h("div", {});
  const buttons = h("div", {});
  const top = h("div", {});
  const runs = h("tbody", {});
  const backfills = h("tbody", {});
  let shownVersion = null;
  const pager = cursorPager(() => draw().catch((e) => showError(message, e)), { prefix: "runs-", noun: "runs" });
  const draw = async () => {
    const runsPath = `/jobs/${encodeURIComponent(jobId)}/runs?limit=${HISTORY_PAGE}`;
    const [job, page, older, filled] = await Promise.all([ // at once; the preview needs the job
      get(`/jobs/${encodeURIComponent(jobId)}`),
      get(pager.cursor() ? `${runsPath}&cursor=${encodeURIComponent(pager.cursor())}` : runsPath),
      pager.first() ? null : get(runsPath), // the chart: always the newest runs
      get(`/jobs/${encodeURIComponent(jobId)}/backfills?limit=10`),
    ]);
    const newest = older || page;
    const next = await upcoming(job);
    title.firstChild.textContent = `Job ${job.team}/${job.name} `;
    if (shownVersion !== `${job.version}/${job.paused}`) {  // keep a note being typed across polls
      shownVersion = `${job.version}/${job.paused}`;
      buttons.replaceChildren(actions(job, message, draw), can("backfill") ? backfillForm(job, message, draw) : "");
    }
    top.replaceChildren(h("div", { class: "grid" }, definition(job), h("div", {}, h("h2", {}, "Upcoming fire times"), next, h("h2", {}, "Lateness and duration"), await historyChart(jobId, newest.items))));
    runs.replaceChildren(...runRows(page.items, false, pager.first() ? "No runs yet." : "No older runs."));
    pager.shown(page);
    const cancel = backfillCanceller(job, message, draw);
    backfills.replaceChildren(...(filled.items.length ? filled.items.map((b) => backfillRow(b, cancel)) : [h("tr", {}, h("td", { colspan: 8, class: "muted" }, "No backfills."))]));
  };
  const backfillTable = h("table", { id: "backfills" }, h("thead", {}, h("tr", {}, ["From", "To", "State", "Progress", "Created", "Had runs", "Next slot", ""].map((t) => h("th", {}, t)))), backfills);
  view.replaceChildren(title, message, buttons, top, h("h2", {}, "Backfills"), backfillTable, h("h2", {}, "Run history"),
    h("p", {}, h("a", { href: `#/runs?job_id=${encodeURIComponent(jobId)}`, id: "filter-runs" }, "Filter this job's runs (state, reason, time, lateness) →")),
    h("table", { id: "runs" }, h("thead", {}, h("tr", {}, runHeaders(false).map((t) => h("th", {}, t)))), runs), pager.element);
  return live(orMissing(draw, "job"), status, [`job:${jobId}`]).catch((e) => showError(message, e));
}
