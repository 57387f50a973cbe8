// The job form (#/new, #/edit/ID): a form drawn from the API's own schema of a job (forms/), a field
// per property, the target's fields those of the chosen kind; or the same definition as JSON or YAML
// (forms/text.js). Every view edits one document, so switching keeps every key, known to the form or
// not. The API
// checks it as it is typed (the same checks as saving, nothing written), each refused field's
// message under it, and says the schedule in words with its next fires.

import { Problem, api, get } from "../api.js";
import { h, showError, view } from "../dom.js";
import { fireList } from "../forms/fires.js";
import { jobSchema } from "../forms/schema.js";
import { FORMATS, readText } from "../forms/text.js";
import { field } from "../forms/widgets.js";
import { generation, session } from "../state.js";

// Where each field is drawn; a field of the schema not named here goes under "More".
const SECTIONS = [
  ["Job", ["team", "name", "description", "queue"]],
  ["Schedule", ["schedule", "timezone", "dst_gap", "dst_fold", "jitter_s", "start_at", "end_at", "calendars", "calendar_shift", "delete_after_success"]],
  ["Target", ["target"]],
  ["Payload", ["payload"]],
  ["Policies", ["timeout_s", "overlap", "retry", "misfire", "retention"]],
  ["Labels", ["labels"]],
];
const SCHEDULE_FIELDS = ["schedule", "timezone", "dst_gap", "dst_fold"];
const VALIDATE_MS = 300;

function stylesheet() {
  if (document.getElementById("forms-css")) return;
  document.head.append(h("link", { id: "forms-css", rel: "stylesheet", href: "assets/forms/forms.css" }));
}

// The sections of the form for `schema`'s properties.
function sections(ctx, schema) {
  const properties = schema.properties || {};
  const required = new Set(schema.required || []);
  const named = SECTIONS.flatMap(([, keys]) => keys);
  const more = Object.keys(properties).filter((key) => !named.includes(key));
  return [...SECTIONS, ["More", more]]
    .map(([title, keys]) => [title, keys.filter((key) => key in properties)])
    .filter(([, keys]) => keys.length)
    .map(([title, keys]) => h("section", { class: "form-section", "data-section": title },
      h("h2", {}, title), h("div", { class: "fields" }, keys.map((key) => field(ctx, [key], properties[key], required.has(key))))));
}

// Each refused field's message under the deepest field of its path that the form shows (target.url
// under the target's URL, labels.x under the labels); the rest, and the problem's detail when no
// field is named, above the Save button.
function showFieldErrors(form, general, errors, detail) {
  for (const slot of form.querySelectorAll(".field-error")) slot.replaceChildren();
  for (const node of form.querySelectorAll(".field.invalid")) node.classList.remove("invalid");
  const left = [];
  for (const [path, message] of errors) {
    const parts = String(path || "").split(".").filter(Boolean);
    let slot = null;
    let depth = parts.length;
    for (; depth > 0 && !slot; depth -= 1) {
      const found = form.querySelector(`.field-error[data-path="${CSS.escape(parts.slice(0, depth).join("."))}"]`);
      if (found && found.offsetParent !== null) slot = found;
    }
    if (!slot) { left.push(path ? `${path}: ${message}` : message); continue; }
    const rest = parts.slice(depth + 1).join(".");
    slot.append(h("div", {}, rest ? `${rest}: ${message}` : message));
    slot.closest(".field").classList.add("invalid");
  }
  if (!errors.length && detail) left.push(detail);
  general.replaceChildren(...(left.length ? [h("div", { class: "error", role: "alert" }, left.join("\n"))] : []));
}

const problemErrors = (problem) => (problem.body.errors || []).map((e) => [e.field, e.message || e.detail || ""]);

// The names of a team's secrets (never their values: the API gives none), once per team and page.
function secretNamer(state) {
  const known = new Map();
  return () => {
    const team = typeof state.spec.team === "string" ? state.spec.team : "";
    if (!team) return Promise.resolve([]);
    if (!known.has(team)) {
      known.set(team, get(`/teams/${encodeURIComponent(team)}/secrets?limit=1000`)
        .then((page) => page.items.map((secret) => secret.name)).catch(() => []));
    }
    return known.get(team);
  };
}

async function editor(title, initial, validatePath, save) {
  const shown = generation;
  const { components, job: schema } = await jobSchema();
  if (shown !== generation) return; // another page was opened meanwhile
  stylesheet();
  const state = { spec: initial, mode: "form", textError: null };
  const unreadable = new Map();
  const general = h("div", { id: "form-errors" });
  const words = h("div", { class: "words", id: "schedule-words" });
  const fires = h("div", { class: "muted", id: "schedule-check" });
  const body = h("div", { id: "form-view" });
  const formTab = h("button", { type: "button", id: "view-form", class: "tab active" }, "Form");
  const texts = Object.fromEntries(Object.entries(FORMATS).map(([format, { label }]) => {
    const area = h("textarea", { id: `job-${format}`, spellcheck: "false", rows: 24, "aria-label": `the job as ${label}` });
    const error = h("div", { class: "field-error", id: `error-${format}`, role: "alert" });
    area.addEventListener("input", () => {
      const read = readText(format, area.value);
      state.textError = read.error || null;
      error.textContent = read.error || "";
      if (read.spec) state.spec = read.spec;
    });
    const tab = h("button", { type: "button", id: `view-${format}`, class: "tab" }, label);
    return [format, { area, tab, box: h("div", { class: "text-view", id: `${format}-view`, hidden: true }, area, error) }];
  }));
  const form = h("form", { id: "job-form", novalidate: true },
    h("div", { class: "tabs", role: "tablist" }, formTab, Object.values(texts).map((text) => text.tab)),
    h("div", { class: "card explain" }, h("strong", {}, "Schedule: "), words, fires),
    body, Object.values(texts).map((text) => text.box), general,
    h("button", { class: "primary", type: "submit", id: "save" }, "Save"));

  let asked = 0; // answers to older keystrokes than the last are dropped
  const validate = async () => {
    const mine = ++asked;
    if (state.textError) { form.dataset.valid = "false"; return; }
    if (unreadable.size) { form.dataset.valid = "false"; showFieldErrors(form, general, [...unreadable]); return; }
    try {
      const checked = (await api("POST", validatePath, state.spec)).body;
      if (mine !== asked) return;
      showFieldErrors(form, general, []);
      words.textContent = checked.schedule_description;
      fires.replaceChildren(checked.fires.length ? fireList(checked.fires, { id: "schedule-fires" }) : "no fires",
        ...checked.warnings.map((w) => h("div", {}, `⚠ ${w}`)));
      form.dataset.valid = "true";
    } catch (error) {
      if (mine !== asked) return;
      form.dataset.valid = "false";
      if (!(error instanceof Problem)) { showFieldErrors(form, general, [], error.message); return; }
      showFieldErrors(form, general, problemErrors(error), error.message);
      if (problemErrors(error).some(([path]) => SCHEDULE_FIELDS.includes(String(path)))) {
        words.textContent = "—";
        fires.replaceChildren();
      }
    }
  };
  let pending = null;
  const soon = () => { clearTimeout(pending); pending = setTimeout(validate, VALIDATE_MS); };
  const ctx = { components, spec: () => state.spec, changed: soon, unreadable, secretNames: secretNamer(state) };
  const drawForm = () => body.replaceChildren(...sections(ctx, schema));

  // Form, JSON or YAML: a view is left only with a document the next one can show.
  const show = (mode) => {
    if (mode === state.mode || state.textError) return;
    if (unreadable.size) { showFieldErrors(form, general, [...unreadable]); return; }
    if (mode === "form") drawForm();
    else texts[mode].area.value = FORMATS[mode].print(state.spec);
    state.mode = mode;
    body.hidden = mode !== "form";
    formTab.classList.toggle("active", mode === "form");
    for (const [format, text] of Object.entries(texts)) {
      text.box.hidden = mode !== format;
      text.tab.classList.toggle("active", mode === format);
    }
    soon();
  };
  formTab.addEventListener("click", () => show("form"));
  for (const [format, text] of Object.entries(texts)) text.tab.addEventListener("click", () => show(format));
  form.addEventListener("input", soon);
  form.addEventListener("change", soon);
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    clearTimeout(pending);
    if (state.textError) return;
    if (unreadable.size) { showFieldErrors(form, general, [...unreadable]); return; }
    try {
      const job = await save(state.spec);
      location.hash = `#/jobs/${encodeURIComponent(job.id)}`;
    } catch (error) {
      if (error instanceof Problem) showFieldErrors(form, general, problemErrors(error), error.describe());
      else showError(general, error);
    }
  });
  drawForm();
  view.replaceChildren(h("h1", {}, title),
    h("p", { class: "muted" }, "Checked by the API as you type (the same checks as saving, nothing is written); each refused field says why under it."), form);
  validate();
}

export async function newJobPage() {
  const team = session.caller.teams && session.caller.teams.length ? session.caller.teams[0] : "default";
  const initial = { team, name: "", schedule: "*/5 * * * *", timezone: "UTC", target: { type: "http", url: "https://example.com/hook" } };
  await editor("New job", initial, "/jobs:validate", async (spec) => (await api("POST", "/jobs", spec)).body)
    .catch((error) => showError(view, error));
}

export async function editPage(jobId) {
  const [{ job: schema }, { body: job, headers }] = await Promise.all([jobSchema(), api("GET", `/jobs/${encodeURIComponent(jobId)}`)]);
  const spec = Object.fromEntries(Object.keys(schema.properties).filter((key) => key in job).map((key) => [key, job[key]]));
  const path = `/jobs/${encodeURIComponent(jobId)}`;
  await editor(`Edit ${job.team}/${job.name}`, spec, `${path}/validate`,
    async (changed) => (await api("PUT", path, changed, { "If-Match": headers.get("ETag") || `"${job.version}"` })).body);
}
