// Form controls drawn from JSON Schema (forms/schema.js): one field per property, each writing what
// is typed, as typed, into one JSON document (the form's `spec`), so that the API judges every value
// and a key the form never touched stays as it was. A field's error slot (`.field-error`, by
// `data-path`) is where the editor puts what the API says of that field.
//
// `ctx`: {components, spec() (the document), changed() (after a change made by a click rather than
// by typing), secretNames() (a promise of the team's secret names), unreadable (Map: path -> why a
// text is not JSON)}.

import { h } from "../dom.js";
import { choices, isSecretRef, nullable, resolve, tagged, textOrSecret } from "./schema.js";

const NUMBER = /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/;
const LONG_TEXT = 8192; // longer strings get a text area

export const pathId = (path) => path.join("-");

export function getIn(document, path) {
  return path.reduce((node, key) => (node !== null && typeof node === "object" ? node[key] : undefined), document);
}

// Sets the value at `path` (undefined: removes its key), making the objects on the way.
export function putIn(document, path, value) {
  let node = document;
  for (const key of path.slice(0, -1)) {
    if (node[key] === null || typeof node[key] !== "object") node[key] = {};
    node = node[key];
  }
  const last = path[path.length - 1];
  if (value === undefined) delete node[last];
  else node[last] = value;
}

const humane = (key) => String(key).replace(/_s$/, " (s)").replace(/_/g, " ").replace(/^./, (c) => c.toUpperCase());

// One property: its label, control, description and error slot.
export function field(ctx, path, schema, required) {
  const resolved = resolve(ctx.components, schema);
  const id = `field-${pathId(path)}`;
  const slot = { get: () => getIn(ctx.spec(), path), set: (value) => putIn(ctx.spec(), path, value) };
  const made = control(ctx, path, slot, schema, required, id);
  const top = path.length === 1 ? path[0] : undefined;
  return h("div", { class: `field ${made.wide ? "field-wide" : "field-plain"}`, "data-field": top, "data-path": path.join(".") },
    h("label", { for: id }, humane(path[path.length - 1])),
    made.node,
    resolved.description ? h("small", { class: "hint" }, resolved.description) : null,
    h("div", { class: "field-error", "data-for": top, "data-path": path.join("."), id: `error-${pathId(path)}`, role: "alert" }));
}

// The fields of an object schema's properties, under `path` (`skip`: properties drawn elsewhere).
export function fields(ctx, path, schema, skip = []) {
  const resolved = resolve(ctx.components, schema);
  const required = new Set(resolved.required || []);
  return Object.entries(resolved.properties || {}).filter(([key]) => !skip.includes(key))
    .map(([key, property]) => field(ctx, [...path, key], property, required.has(key)));
}

// {node, wide}: the control for `schema`, reading and writing through `slot`.
function control(ctx, path, slot, schema, required, id) {
  const { components } = ctx;
  const union = tagged(components, schema);
  if (union) return { node: kindChoice(ctx, path, slot, union, id), wide: true };
  const secretText = textOrSecret(components, schema);
  if (secretText) return { node: textOrSecretControl(ctx, slot, secretText, id), wide: false };
  const { inner, nullable: orNull } = nullable(components, schema);
  if (isSecretRef(components, inner)) return { node: secretChoice(ctx, slot, orNull, id), wide: false };
  const closed = choices(components, inner);
  if (closed) return { node: choice(slot, closed, inner, orNull, id), wide: false };
  if (inner.type === "boolean") return { node: checkbox(slot, inner, id), wide: false };
  if (inner.type === "integer" || inner.type === "number") return { node: text(slot, inner, orNull, required, id, typedNumber), wide: false };
  if (inner.type === "string" && (inner.maxLength || 0) > LONG_TEXT) return { node: text(slot, inner, orNull, required, id, null, true), wide: true };
  if (inner.type === "string") return { node: text(slot, inner, orNull, required, id), wide: false };
  if (inner.type === "array" && scalar(components, inner.items)) return { node: list(ctx, slot, inner.items, id), wide: false };
  if (inner.type === "object" && inner.properties) {
    return { node: orNull ? optionalGroup(ctx, path, slot, inner, id) : group(ctx, path, inner, id), wide: true };
  }
  const values = mapValues(inner);
  if (values) return { node: pairs(ctx, slot, values, id), wide: true };
  return { node: jsonText(ctx, path, slot, id), wide: true };
}

// The schema of a map's values (an object keyed by pattern: labels, headers), else null.
function mapValues(schema) {
  if (schema.type !== "object" || schema.properties) return null;
  const patterned = Object.values(schema.patternProperties || {});
  if (patterned.length === 1) return patterned[0];
  return schema.additionalProperties && typeof schema.additionalProperties === "object" ? schema.additionalProperties : null;
}

function scalar(components, schema) {
  const { inner } = nullable(components, schema);
  return ["string", "integer", "number"].includes(inner.type) || Boolean(choices(components, inner));
}

// A number as typed: a number when it reads as one, else the text itself (the API names the field).
function typedNumber(raw) {
  return NUMBER.test(raw.trim()) ? Number(raw) : raw;
}

// An empty text: null where null is allowed, "" where the field is required, else no key (the default).
function text(slot, schema, orNull, required, id, parse = null, area = false) {
  const value = slot.get();
  const shown = value === undefined || value === null ? "" : typeof value === "string" ? value : JSON.stringify(value);
  const placeholder = schema.default === undefined || schema.default === null ? undefined : String(schema.default);
  const oninput = (event) => {
    const raw = event.target.value;
    if (raw === "") slot.set(orNull ? null : required ? "" : undefined);
    else slot.set(parse ? parse(raw) : raw);
  };
  if (area) return h("textarea", { id, rows: 3, spellcheck: "false", oninput }, shown);
  return h("input", { id, type: "text", value: shown, placeholder, spellcheck: "false", autocomplete: "off", inputmode: parse ? "decimal" : undefined, oninput });
}

function checkbox(slot, schema, id) {
  const value = slot.get();
  return h("input", { id, type: "checkbox", checked: Boolean(value ?? schema.default), onchange: (event) => slot.set(event.target.checked) });
}

// A closed set; "" is null where null is allowed. A value the set does not hold (typed in the JSON
// view) is kept as an option, so that the form shows it rather than changing it.
function choice(slot, values, schema, orNull, id) {
  const value = slot.get();
  const shown = value === undefined ? schema.default : value;
  const options = [...values];
  if (shown !== undefined && shown !== null && !options.includes(shown)) options.push(shown);
  const select = h("select", { id, onchange: (event) => {
    const index = Number(event.target.value);
    slot.set(index < 0 ? null : options[index]);
  } },
  orNull || shown === undefined ? h("option", { value: "-1", selected: shown === null || shown === undefined }, orNull ? "default" : "choose…") : null,
  options.map((option, index) => h("option", { value: String(index), selected: option === shown }, String(option))));
  return select;
}

// A union tagged by a property (a target's `type`): the kind, then that kind's fields. What was
// typed for a kind is kept while another is shown.
function kindChoice(ctx, path, slot, union, id) {
  const kept = {};
  const box = h("div", { class: "kind-fields" });
  const current = () => (slot.get() || {})[union.tag];
  const draw = () => {
    const kind = union.kinds.find(([value]) => value === current());
    box.replaceChildren(...(kind ? fields(ctx, path, kind[1], [union.tag]) : []));
  };
  const names = union.kinds.map(([value]) => value);
  const select = h("select", { id, "data-kind": union.tag, onchange: (event) => {
    const before = slot.get();
    if (before && typeof before === "object") kept[before[union.tag]] = before;
    slot.set(kept[event.target.value] || { [union.tag]: event.target.value });
    draw();
    ctx.changed();
  } },
  names.includes(current()) ? null : h("option", { value: "", selected: true }, current() === undefined ? "choose…" : String(current())),
  names.map((name) => h("option", { value: name, selected: name === current() }, name)));
  draw();
  return h("div", { class: "kind" }, select, box);
}

function group(ctx, path, schema, id) {
  return h("fieldset", { class: "group", id }, fields(ctx, path, schema));
}

// An object that may be null: "set" shows its fields, unset it is null.
function optionalGroup(ctx, path, slot, schema, id) {
  const box = h("div", {});
  const draw = () => box.replaceChildren(...(slot.get() ? [h("fieldset", { class: "group" }, fields(ctx, path, schema))] : []));
  const toggle = h("input", { id, type: "checkbox", checked: Boolean(slot.get()), onchange: (event) => {
    slot.set(event.target.checked ? {} : null);
    draw();
    ctx.changed();
  } });
  draw();
  return h("div", {}, h("label", { class: "inline" }, toggle, " set (else: the default)"), box);
}

// A list of scalars: a row each, added and removed by buttons.
function list(ctx, slot, items, id) {
  const box = h("div", { class: "rows", id });
  const { inner } = nullable(ctx.components, items);
  const numeric = inner.type === "integer" || inner.type === "number";
  const draw = () => {
    const values = Array.isArray(slot.get()) ? slot.get() : [];
    box.replaceChildren(...values.map((value, index) => h("div", { class: "row", "data-index": String(index) },
      h("input", { type: "text", value: value === null ? "" : String(value), spellcheck: "false", "aria-label": `item ${index + 1}`,
        oninput: (event) => { values[index] = numeric ? typedNumber(event.target.value) : event.target.value; } }),
      h("button", { type: "button", class: "remove", title: "Remove", onclick: () => { values.splice(index, 1); slot.set(values); draw(); ctx.changed(); } }, "×"))),
    h("button", { type: "button", class: "add", onclick: () => { slot.set([...values, numeric ? null : ""]); draw(); ctx.changed(); } }, "+ add"));
  };
  draw();
  return box;
}

// Key/value rows (labels, headers, environment, metadata): keys in the order typed; a row with
// neither key nor value is left out; a key typed twice is marked, and the later row wins.
function pairs(ctx, slot, valueSchema, id) {
  const box = h("div", { class: "rows pairs", id });
  const current = slot.get();
  const rows = current && typeof current === "object" && !Array.isArray(current) ? Object.entries(current) : [];
  const secretText = textOrSecret(ctx.components, valueSchema);
  const mark = () => {
    const seen = new Set();
    for (const [index, [key]] of rows.entries()) {
      const twice = seen.has(key) && key !== "";
      seen.add(key);
      box.querySelector(`.row[data-index="${index}"]`)?.classList.toggle("duplicate", twice);
    }
  };
  const write = () => {
    const kept = rows.filter(([key, value]) => key !== "" || !(value === "" || value === null || value === undefined));
    slot.set(Object.fromEntries(kept));
    mark();
  };
  const draw = () => {
    box.replaceChildren(...rows.map((row, index) => {
      const valueSlot = { get: () => row[1], set: (value) => { row[1] = value; write(); } };
      const value = secretText ? textOrSecretControl(ctx, valueSlot, secretText, undefined)
        : h("input", { type: "text", class: "pair-value", value: row[1] ?? "", spellcheck: "false", "aria-label": "value", oninput: (event) => valueSlot.set(event.target.value) });
      return h("div", { class: "row", "data-index": String(index) },
        h("input", { type: "text", class: "pair-key", value: row[0], spellcheck: "false", "aria-label": "key", placeholder: "key", oninput: (event) => { row[0] = event.target.value; write(); } }),
        value,
        h("button", { type: "button", class: "remove", title: "Remove", onclick: () => { rows.splice(index, 1); write(); draw(); ctx.changed(); } }, "×"));
    }), h("button", { type: "button", class: "add", onclick: () => { rows.push(["", ""]); draw(); } }, "+ add"));
    mark();
  };
  draw();
  return box;
}

// Plain text, or a reference to a secret of the job's team chosen by name (never a value: the API
// gives none); "none" where null is allowed.
function textOrSecretControl(ctx, slot, { text: textSchema, nullable: orNull }, id) {
  const value = slot.get();
  const mode = value && typeof value === "object" ? "secret" : value === null || (value === undefined && orNull) ? "none" : "text";
  const box = h("span", { class: "text-or-secret" });
  const modes = h("select", { class: "mode", "aria-label": "plain text or secret", onchange: (event) => {
    slot.set({ none: null, text: "", secret: { secret: "" } }[event.target.value]);
    draw(event.target.value);
    ctx.changed();
  } }, [...(orNull ? ["none"] : []), "text", "secret"].map((m) => h("option", { value: m, selected: m === mode }, m)));
  const draw = (shown) => {
    if (shown === "text") {
      const now = slot.get();
      box.replaceChildren(modes, h("input", { id, type: "text", class: "pair-value", value: typeof now === "string" ? now : "", spellcheck: "false", autocomplete: "off",
        maxlength: textSchema.maxLength, "aria-label": "value", oninput: (event) => slot.set(event.target.value) }));
    } else if (shown === "secret") box.replaceChildren(modes, secretChoice(ctx, slot, false, id));
    else box.replaceChildren(modes);
  };
  draw(mode);
  return box;
}

// A secret of the team, by name: the names come from the API's list of the team's secrets.
function secretChoice(ctx, slot, orNull, id) {
  const value = slot.get();
  const chosen = value && typeof value === "object" ? value.secret : "";
  const select = h("select", { id, class: "secret", "aria-label": "secret", onchange: (event) => {
    slot.set(event.target.value === "" ? (orNull ? null : { secret: "" }) : { secret: event.target.value });
  } }, h("option", { value: "" }, orNull ? "none" : "choose a secret…"), chosen ? h("option", { value: chosen, selected: true }, chosen) : null);
  ctx.secretNames().then((names) => {
    for (const name of names) if (name !== chosen) select.append(h("option", { value: name }, name));
    select.dataset.loaded = "true";
  });
  return select;
}

// Any JSON (a payload, or a shape the form has no control for), as JSON text.
function jsonText(ctx, path, slot, id) {
  const value = slot.get();
  const key = path.join(".");
  return h("textarea", { id, rows: 4, spellcheck: "false", oninput: (event) => {
    const raw = event.target.value;
    if (raw.trim() === "") { ctx.unreadable.delete(key); slot.set(undefined); return; }
    try {
      slot.set(JSON.parse(raw));
      ctx.unreadable.delete(key);
    } catch (error) {
      ctx.unreadable.set(key, `not JSON: ${error.message}`);
    }
  } }, value === undefined ? "" : JSON.stringify(value, null, 2));
}
