// One run's page (#/runs/ID): its states and times, each attempt (worker, started, ended,
// duration, outcome, the headers sent and answered), the output each attempt kept (up to the
// worker's --output-tail-bytes, GET /v1/runs/ID/output) and its events; a run the caller cannot
// see is a "not found" page. A running attempt's output so far (its worker writes it at most once
// a second) is in the run's answer, and comes from the event stream (`output` events of
// `run:ID`) as it grows: the new lines are appended, nothing is re-read for them.

import { get } from "../api.js";
import { h, kv, live, seconds, showError, stateBadge, table, view, when } from "../dom.js";
import { orMissing } from "./missing.js";

const ACTIVE = new Set(["PENDING", "RUNNING", "RETRYING"]);
const KEPT = {
  whole: "all of it",
  longer: "its kept tail (a command's, a traceback's) or start (a response body's), up to the worker's --output-tail-bytes",
  excerpt: "its first 1 KiB only",
};

// the headers an HTTP attempt sent or was answered with, credentials already "[redacted]" by the
// worker (a <pre>, not a <details>: the page redraws every few seconds, which would close it)
function headerList(headers) {
  const names = Object.keys(headers || {});
  if (!names.length) return h("span", { class: "muted" }, "—");
  return h("pre", {}, names.map((name) => `${name}: ${headers[name]}`).join("\n"));
}

function took(attempt) {
  if (!attempt.finished_at) return h("span", { class: "running" }, "running");
  return seconds((new Date(attempt.finished_at) - new Date(attempt.started_at)) / 1000);
}

function attemptsTable(run) {
  const rows = run.attempt_details.map((a) => h("tr", { "data-attempt": a.number },
    h("td", { class: "num" }, a.number), h("td", {}, a.worker), h("td", {}, when(a.started_at)),
    h("td", {}, a.finished_at ? when(a.finished_at) : h("span", { class: "muted" }, "—")),
    h("td", { class: "num duration" }, took(a)),
    h("td", {}, a.outcome || "—"), h("td", {}, a.status_code ?? a.exit_code ?? "—"), h("td", {}, a.error || ""),
    h("td", { class: "headers sent" }, headerList(a.request_headers)),
    h("td", { class: "headers received" }, headerList(a.response_headers))));
  return [
    table(["#", "Worker", "Started", "Ended", "Duration", "Outcome", "Status / exit", "Error", "Headers sent", "Headers received"], rows, { id: "attempts" }),
    h("p", { class: "muted" }, "Headers are as the worker recorded them (at most 64 each way), credentials [redacted]."),
  ];
}

// Shows `text`, a running attempt's output so far, in its <pre>: what was shown and more is
// appended (only the new lines), anything else (the kept window moved on) replaces it.
function showSoFar(pre, text) {
  const shown = pre.textContent;
  if (text === shown) return;
  if (text.startsWith(shown)) pre.append(text.slice(shown.length));
  else pre.textContent = text;
}

// Each attempt's kept output; a running attempt's output so far (see the module's comment).
function outputs(run, kept) {
  const byNumber = new Map(kept.attempts.map((a) => [a.number, a]));
  const blocks = run.attempt_details.map((attempt) => {
    const out = byNumber.get(attempt.number);
    const header = h("h3", {}, `Attempt ${attempt.number}`);
    if (!attempt.finished_at) {
      return h("div", { "data-output": attempt.number, "data-kept": "running" }, header,
        h("p", { class: "muted" }, "Running: its output so far, as its worker writes it."),
        h("pre", { class: "output live-output" }, attempt.output || ""));
    }
    if (!out || out.output === null) return h("div", { "data-output": attempt.number, "data-kept": "none" }, header, h("p", { class: "muted" }, "No output."));
    const size = new TextEncoder().encode(out.output).length;
    return h("div", { "data-output": attempt.number, "data-kept": out.kept },
      header, h("p", { class: "muted" }, `${size} bytes kept: ${KEPT[out.kept] || out.kept}.`), h("pre", { class: "output" }, out.output));
  });
  const note = ACTIVE.has(run.state)
    ? h("p", { class: "notice", id: "tail-note", role: "status" }, "Live tail: a running attempt's output appears line by line as its worker writes it (about once a second); its whole kept output when it ends.")
    : null;
  return [note, blocks.length ? blocks : h("p", { class: "muted" }, "No attempts yet.")];
}

export function runPage(runId) {
  const status = h("span", { class: "live" });
  const message = h("div", {});
  const body = h("div", {});
  const path = `/runs/${encodeURIComponent(runId)}`;
  let kept = { attempts: [] };
  let keptFor = null; // the attempts' ends the output was read at: read again only when they change
  const output = h("div", { id: "output" });
  const draw = async () => {
    const run = await get(path);
    const ends = JSON.stringify([run.state, run.attempt_details.map((a) => a.finished_at)]);
    if (ends !== keptFor) {
      kept = await get(`${path}/output`);
      keptFor = ends;
      output.replaceChildren(...outputs(run, kept).flat().filter(Boolean));
    } else {
      for (const a of run.attempt_details) if (!a.finished_at && a.output) soFar(a.number, a.output);
    }
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
      ...attemptsTable(run),
      h("h2", {}, "Output"),
      output,
      h("h2", {}, "Events"),
      table(["At", "State", "From", "Attempt", "Node", "Detail"], run.events.map((e) => h("tr", {},
        h("td", {}, when(e.at)), h("td", {}, stateBadge(e.state)), h("td", {}, e.previous || "—"), h("td", { class: "num" }, e.attempt), h("td", {}, e.node || "—"), h("td", {}, e.detail || ""))), { id: "events" })
    );
  };
  view.replaceChildren(h("h1", {}, `Run ${runId}`, status), message, body);
  const soFar = (number, text) => {
    const pre = output.querySelector(`[data-output="${number}"][data-kept=running] pre`);
    if (pre) showSoFar(pre, text);
    return Boolean(pre);
  };
  // an attempt's output so far: shown here, no redraw (one that the page does not show yet, a new
  // attempt's, is left to the redraw that its run event brings)
  const heard = (event) => event.type === "output" && event.data.id === runId && soFar(event.data.attempt, event.data.output);
  return live(orMissing(draw, "run"), status, [`run:${runId}`], heard).catch((e) => showError(message, e));
}
