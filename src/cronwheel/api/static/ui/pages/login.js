// The login page: a token is sent once to open a session (api.js login); `loggedIn` gets the
// session's answer. The app (app.js) clears the session and the navigation before showing it.

import { login } from "../api.js";
import { h, showError, view } from "../dom.js";

export function loginPage(message, kind, loggedIn) {
  const error = h("div", {});
  if (message) error.append(h("div", { class: kind, role: kind === "error" ? "alert" : "status" }, message));
  const input = h("input", { id: "token", type: "password", autocomplete: "off", placeholder: "cw_… or a JWT", required: true });
  const form = h(
    "form",
    { class: "login", id: "login-form" },
    h("h1", {}, "Log in to cronwheel"),
    h("p", { class: "muted" }, "Paste an API token (", h("code", {}, "cronwheel server"), " makes one at first start, in ",
      h("code", {}, "cronwheel.db.token"), "; ", h("code", {}, "cronwheel tokens create"), " makes more) or your identity provider's token."),
    h("label", { for: "token" }, "Token"),
    input,
    error,
    h("button", { class: "primary", type: "submit", id: "login-button" }, "Log in"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const opened = await login(input.value.trim());
      input.value = "";
      loggedIn(opened);
    } catch (problem) {
      showError(error, problem.status === 401 ? new Error(`Refused: ${problem.message}`) : problem);
    }
  });
  view.replaceChildren(form);
  input.focus();
}
