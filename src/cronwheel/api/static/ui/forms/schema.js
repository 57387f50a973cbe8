// A job's fields as the API itself states them: the JSON Schema of its create body in the API's
// OpenAPI document (/openapi.json, public, the same for every caller), read once per page load. The
// job form is drawn from it, so a target kind or field the API gains appears without editing the page.

const BODY = "JobCreate";
let loaded = null;

// The document's component schemas and the job's schema, {components, job}.
export function jobSchema() {
  loaded ||= fetch("../openapi.json", { credentials: "same-origin" }).then(async (response) => {
    if (!response.ok) throw new Error(`the API's OpenAPI document: HTTP ${response.status}`);
    const components = (await response.json()).components.schemas;
    if (!components[BODY]) throw new Error(`the API's OpenAPI document has no ${BODY} schema`);
    return { components, job: components[BODY] };
  }).catch((error) => {
    loaded = null; // a failed read is tried again at the next visit
    throw error;
  });
  return loaded;
}

// `schema` with its $ref followed (the referring schema's own keys, a default or a description, win).
export function resolve(components, schema) {
  let current = schema || {};
  while (current.$ref) {
    const { $ref, ...rest } = current;
    current = { ...components[$ref.split("/").pop()], ...rest };
  }
  return current;
}

// {inner, nullable}: `anyOf: [X, null]` is X that may be null.
export function nullable(components, schema) {
  const resolved = resolve(components, schema);
  const choices = resolved.anyOf;
  if (!choices || !choices.some((c) => c.type === "null")) return { inner: resolved, nullable: false };
  const rest = choices.filter((c) => c.type !== "null");
  const { anyOf, ...outer } = resolved;
  const inner = rest.length === 1 ? { ...resolve(components, rest[0]), ...outer } : { ...outer, anyOf: rest };
  return { inner, nullable: true };
}

// The values a schema allows when it is a closed set (enum, const, or a choice of them), else null.
export function choices(components, schema) {
  const resolved = resolve(components, schema);
  if (Array.isArray(resolved.enum)) return resolved.enum;
  if ("const" in resolved) return [resolved.const];
  const options = resolved.anyOf || resolved.oneOf;
  if (!options) return null;
  const each = options.map((option) => choices(components, option));
  return each.every(Boolean) ? each.flat() : null;
}

// A secret reference, {"secret": NAME}: an object whose only property is `secret`.
export function isSecretRef(components, schema) {
  const resolved = resolve(components, schema);
  const keys = Object.keys(resolved.properties || {});
  return resolved.type === "object" && keys.length === 1 && keys[0] === "secret";
}

// A value that is plain text or a secret reference: {text, secret} (its text schema and whether
// null is allowed too), else null.
export function textOrSecret(components, schema) {
  const { inner, nullable: orNull } = nullable(components, schema);
  const options = (inner.anyOf || []).map((option) => resolve(components, option));
  const refs = options.filter((option) => isSecretRef(components, option));
  if (refs.length !== 1 || options.length !== 2) return null;
  return { text: options.find((option) => !refs.includes(option)), nullable: orNull };
}

// The kinds of a union tagged by a property ({tag, kinds: [[value, schema], ...]}), else null.
export function tagged(components, schema) {
  const resolved = resolve(components, schema);
  const tag = resolved.discriminator && resolved.discriminator.propertyName;
  if (!tag) return null;
  const kinds = (resolved.oneOf || resolved.anyOf || []).map((option) => {
    const kind = resolve(components, option);
    return [choices(components, kind.properties[tag])[0], kind];
  });
  return { tag, kinds };
}
