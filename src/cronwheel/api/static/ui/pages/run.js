// One run's page (#/runs/ID): its states and times, each attempt (worker, started, ended,
// duration, outcome, the headers sent), the output each attempt kept (up to the worker's
// --output-tail-bytes, GET /v1/runs/ID/output) and its events; a run the caller cannot see is a
// "not found" page. While the run is active the output is read again at each redraw: a worker
// records an attempt's output when the attempt ends.

import { get } from "../api.js";
import { h, kv, live, seconds, showError, stateBadge, table, view, when } from "../dom.js";
import { orMissing } from "./missing.js";

const ACTIVE = new Set(["PENDING", "RUNNING", "RETRYING"]);
const KEPT = {
  whole: "all of it",
  longer: "its kept tail (a command's, a traceback's) or start (a response body's), up to the worker's --output-tail-bytes",
  excerpt: "its first 1 KiB only",
};

// the headers an HTTP attempt sent, credentials already "[redacted]" by the worker (a <pre>, not
// a <details>: the page redraws every few seconds, which would close it)
function sentHeaders(headers) {
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
    h("td", { class: "headers" }, sentHeaders(a.request_headers))));
  return [
    table(["#", "Worker", "Started", "Ended", "Duration", "Outcome", "Status / exit", "Error", "Headers sent"], rows, { id: "attempts" }),
    h("p", { class: "muted" }, "Headers sent are as the worker recorded them, credentials [redacted]; the headers a target answered with are not recorded."),
  ];
}

// Each attempt's kept output; an attempt still running has none yet (see the module's comment).
function outputs(run, kept) {
  const byNumber = new Map(kept.attempts.map((a) => [a.number, a]));
  const blocks = run.attempt_details.map((attempt) => {
    const out = byNumber.get(attempt.number);
    const header = h("h3", {}, `Attempt ${attempt.number}`);
    if (!attempt.finished_at) return h("div", { "data-output": attempt.number, "data-kept": "running" }, header, h("p", { class: "muted" }, "Running: its output appears here when the attempt ends."));
    if (!out || out.output === null) return h("div", { "data-output": attempt.number, "data-kept": "none" }, header, h("p", { class: "muted" }, "No output."));
    const size = new TextEncoder().encode(out.output).length;
    return h("div", { "data-output": attempt.number, "data-kept": out.kept },
      header, h("p", { class: "muted" }, `${size} bytes kept: ${KEPT[out.kept] || out.kept}.`), h("pre", { class: "output" }, out.output));
  });
  const note = ACTIVE.has(run.state)
    ? h("p", { class: "notice", id: "tail-note", role: "status" }, "Live tail: refreshed every few seconds while the run is active. The worker records an attempt's output when the attempt ends, so a running attempt's output appears as it finishes, not line by line.")
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
  return live(orMissing(draw, "run"), status, [`run:${runId}`]).catch((e) => showError(message, e));
}
