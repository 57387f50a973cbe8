// A table row per run, as the runs page and a job's history show them (the job's column only
// where runs of many jobs are listed).

import { h, seconds, stateBadge, when } from "./dom.js";

export const RUN_STATES = ["PENDING", "RUNNING", "RETRYING", "SUCCESS", "FAILED", "SKIPPED"];
export const SKIP_REASONS = ["misfire", "overlap", "paused", "calendar"]; // model.SkipReason

export function runHeaders(withJob) {
  return ["Run", ...(withJob ? ["Job"] : []), "Kind", "Slot", "State", "Attempts", "Start lateness", "Finished", "Reason"];
}

function jobCell(run) {
  if (!run.job_name) return h("td", { class: "muted" }, `${run.job_id} (deleted)`);
  return h("td", {}, h("a", { href: `#/jobs/${encodeURIComponent(run.job_id)}` }, `${run.job_team}/${run.job_name}`));
}

export function runRow(run, withJob = false) {
  return h(
    "tr",
    { "data-run": run.id, "data-state": run.state, "data-slot": run.slot },
    h("td", {}, h("a", { href: `#/runs/${encodeURIComponent(run.id)}` }, run.id)),
    withJob ? jobCell(run) : null,
    h("td", {}, run.kind),
    h("td", {}, when(run.slot)),
    h("td", {}, stateBadge(run.state)),
    h("td", { class: "num" }, run.attempts),
    h("td", { class: "num" }, seconds(run.start_lateness_s)),
    h("td", {}, when(run.finished_at)),
    h("td", {}, run.reason || "")
  );
}

export function runRows(items, withJob, empty) {
  if (items.length) return items.map((run) => runRow(run, withJob));
  return [h("tr", {}, h("td", { colspan: runHeaders(withJob).length, class: "muted" }, empty))];
}
