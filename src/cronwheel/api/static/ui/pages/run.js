// One run's page (#/runs/ID): its states and times, each attempt (worker, outcome, output, the
// headers sent) and its events; a run the caller cannot see is a "not found" page.

import { get } from "../api.js";
import { h, kv, live, seconds, showError, stateBadge, table, view, when } from "../dom.js";
import { orMissing } from "./missing.js";

// the headers an HTTP attempt sent, credentials already "[redacted]" by the worker (a <pre>, not
// a <details>: the page redraws every few seconds, which would close it)
function sentHeaders(headers) {
  const names = Object.keys(headers || {});
  if (!names.length) return h("span", { class: "muted" }, "—");
  return h("pre", {}, names.map((name) => `${name}: ${headers[name]}`).join("\n"));
}

export function runPage(runId) {
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
  return live(orMissing(draw, "run"), status, [`run:${runId}`]).catch((e) => showError(message, e));
}
