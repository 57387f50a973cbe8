// The dashboard's only way to the server: its session (/ui/session) and the bridge to the /v1 API
// (/ui/api/v1/...), which acts as the session's token (cronwheel/api/ui.py). The CSRF token lives in
// this module's memory only; the session cookie is HttpOnly (no script here can read it).

let csrf = null;
let onLoggedOut = () => {};

export class Problem extends Error {
  constructor(status, body) {
    super((body && (body.detail || body.title)) || `HTTP ${status}`);
    this.status = status;
    this.body = body || {};
  }

  // One line per refused field (validation problems carry `errors`), else the detail.
  describe() {
    const errors = this.body.errors || [];
    if (!errors.length) return this.message;
    return [this.message, ...errors.map((e) => `${e.field || e.pointer || ""}: ${e.message || e.msg || e.detail || JSON.stringify(e)}`)].join("\n");
  }
}

export function whenLoggedOut(callback) {
  onLoggedOut = callback;
}

async function answer(response) {
  const text = await response.text();
  let body = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    body = { detail: text };
  }
  if (!response.ok) {
    if (response.status === 401) {
      csrf = null;
      onLoggedOut();
    }
    throw new Problem(response.status, body);
  }
  return { body, headers: response.headers, status: response.status };
}

// The live session's caller, or null (no session, or it ended).
export async function currentSession() {
  const response = await fetch("session", { credentials: "same-origin", cache: "no-store" });
  if (response.status === 401) return null;
  const { body } = await answer(response);
  csrf = body.csrf;
  return body;
}

// Opens a session with `token` (sent once, as the API takes it: an Authorization header).
export async function login(token) {
  const response = await fetch("session", {
    method: "POST",
    credentials: "same-origin",
    cache: "no-store",
    headers: { Authorization: `Bearer ${token}` },
  });
  if (response.status === 401) {
    const body = await response.json().catch(() => ({}));
    throw new Problem(401, body);
  }
  const { body } = await answer(response);
  csrf = body.csrf;
  return body;
}

export async function logout() {
  if (csrf) {
    await fetch("session", { method: "DELETE", credentials: "same-origin", headers: { "X-Cronwheel-CSRF": csrf } });
  }
  csrf = null;
}

// A request to the API: `path` is the /v1 path ("/jobs?team=a"), `body` is sent as JSON.
export async function api(method, path, body = undefined, extraHeaders = {}) {
  const headers = { "X-Cronwheel-CSRF": csrf || "", Accept: "application/json", ...extraHeaders };
  const init = { method, headers, credentials: "same-origin", cache: "no-store" };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  return answer(await fetch(`api/v1${path}`, init));
}

export const get = async (path) => (await api("GET", path)).body;
