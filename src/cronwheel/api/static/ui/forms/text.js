// A job's definition as text to edit by hand: JSON, or YAML (js-yaml, vendored: vendor/VENDOR.md).
// Each format's print and parse are inverses on JSON values, so switching views loses nothing; YAML
// is read with its core schema (no dates, no YAML 1.1 "yes"/"on" booleans: a value reads as written).

import { dump, load } from "../vendor/js-yaml.js";

export const FORMATS = {
  json: { label: "JSON", print: (value) => JSON.stringify(value, null, 2), parse: (text) => JSON.parse(text) },
  yaml: { label: "YAML", print: (value) => dump(value, { noRefs: true }), parse: (text) => load(text) },
};

// The definition `text` holds in `format`, or why it holds none: {spec} or {error}.
export function readText(format, text) {
  let value;
  try {
    value = FORMATS[format].parse(text);
  } catch (error) {
    return { error: `not ${FORMATS[format].label}: ${String(error.message).split("\n")[0]}` };
  }
  if (value === null || typeof value !== "object" || Array.isArray(value)) return { error: "a job is an object (a mapping of fields)" };
  return { spec: value };
}
