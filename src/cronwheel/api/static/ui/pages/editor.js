// The job form (#/new, #/edit/ID): every field of a definition, checked by the API as it is typed
// (the same checks as saving, nothing written), each refused field's message under it.

import { Problem, api } from "../api.js";
import { h, showError, view } from "../dom.js";
import { session } from "../state.js";

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

export function newJobPage() {
  const team = session.caller.teams && session.caller.teams.length ? session.caller.teams[0] : "default";
  const initial = { team, name: "", schedule: "*/5 * * * *", timezone: "UTC", overlap: "allow", jitter_s: 0, queue: "default", timeout_s: 60,
    target: { type: "http", url: "https://example.com/hook", method: "POST" }, retry: { max_attempts: 1 }, misfire: { policy: "skip" }, labels: {}, payload: null, retention: null, delete_after_success: false,
    calendars: [], calendar_shift: "none" };
  editor("New job", initial, "/jobs:validate", async (spec) => (await api("POST", "/jobs", spec)).body);
}

export async function editPage(jobId) {
  const { body: job, headers } = await api("GET", `/jobs/${encodeURIComponent(jobId)}`);
  const spec = Object.fromEntries(EDITABLE.filter((key) => key in job).map((key) => [key, job[key]]));
  const path = `/jobs/${encodeURIComponent(jobId)}`;
  editor(`Edit ${job.team}/${job.name}`, spec, `${path}/validate`,
    async (changed) => (await api("PUT", path, changed, { "If-Match": headers.get("ETag") || `"${job.version}"` })).body);
}
