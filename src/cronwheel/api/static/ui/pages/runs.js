// The runs page (#/runs?filters): runs of every job the session's teams see, newest slot first,
// filtered by team, job, state, skip reason, a range of slots and lateness, a page at a time by
// the API's cursor (GET /v1/runs).

import { get } from "../api.js";
import { h, live, showError, view } from "../dom.js";
import { cursorPager } from "../pager.js";
import { RUN_STATES, SKIP_REASONS, runHeaders, runRows } from "../runlist.js";

const PAGE_SIZE = 50;
const FILTERS = ["team", "job_id", "state", "reason", "since", "until", "late"]; // GET /v1/runs's

function runsQuery(params, cursor) {
  const query = new URLSearchParams();
  for (const key of FILTERS) if (params.get(key)) query.set(key, params.get(key));
  const limit = Number.parseInt(params.get("limit") || "", 10);
  query.set("limit", String(limit >= 1 && limit <= 1000 ? limit : PAGE_SIZE));
  if (cursor) query.set("cursor", cursor);
  return query.toString();
}

function filterForm(params) {
  const field = (name, attrs = {}) => h("input", { name, value: params.get(name) || "", ...attrs });
  const select = (name, options) =>
    h("select", { name }, options.map(([value, text]) => h("option", { value, selected: (params.get(name) || "") === value }, text)));
  const form = h(
    "form",
    { class: "filters", id: "run-filters" },
    h("label", {}, "Team", field("team", { size: 12 })),
    h("label", {}, "Job id", field("job_id", { size: 22 })),
    h("label", {}, "State", select("state", [["", "any"], ...RUN_STATES.map((s) => [s, s])])),
    h("label", {}, "Skipped for", select("reason", [["", "any reason"], ...SKIP_REASONS.map((r) => [r, r])])),
    h("label", {}, "Slot from", field("since", { size: 20, placeholder: "RFC 3339, e.g. 2026-03-01T00:00:00Z" })),
    h("label", {}, "to (before)", field("until", { size: 20, placeholder: "RFC 3339" })),
    h("label", {}, "Late", select("late", [["", "any"], ["true", "started > 1 s late"]])),
    h("label", {}, "Per page", select("limit", [["", String(PAGE_SIZE)], ["10", "10"], ["100", "100"], ["200", "200"]])),
    h("button", { type: "submit" }, "Filter")
  );
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    const query = new URLSearchParams();
    for (const [key, value] of new FormData(form)) if (value.trim()) query.set(key, value.trim());
    location.hash = `#/runs?${query}`;
  });
  return form;
}

export function runsPage(params) {
  const body = h("tbody", {});
  const message = h("div", {});
  const status = h("span", { class: "live" });
  const draw = async () => {
    let page;
    try {
      page = await get(`/runs?${runsQuery(params, pager.cursor())}`);
    } catch (error) {
      showError(message, error); // a refused filter says which and why
      throw error;
    }
    body.replaceChildren(...runRows(page.items, true, "No runs match."));
    pager.shown(page);
    message.replaceChildren();
  };
  const pager = cursorPager(() => draw().catch((e) => showError(message, e)), { noun: "runs" });
  view.replaceChildren(
    h("h1", {}, "Runs", status),
    filterForm(params),
    message,
    h("table", { id: "run-list" }, h("thead", {}, h("tr", {}, runHeaders(true).map((t) => h("th", {}, t)))), body),
    pager.element
  );
  return live(draw, status, ["runs"]).catch((e) => showError(message, e));
}
