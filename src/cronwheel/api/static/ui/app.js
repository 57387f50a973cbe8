// The cronwheel dashboard's entry point: hash routes (#/jobs, #/jobs/ID, #/runs, #/runs/ID, #/new, #/edit/ID,
// #/cluster, #/upcoming), the navigation and the login and session wiring. Each page is a module of pages/, drawn
// from the /v1 API through the session bridge (api.js) with the helpers of dom.js (server text only
// ever as text) and redrawn from the event stream (live.js); state.js holds the session and the navigation counter.
// The navigation offers only the pages the caller may open (access.js); the header holds the choice
// of the zone times are shown in (time.js).

import { can, scopeOf } from "./access.js";
import { currentSession, logout, whenLoggedOut } from "./api.js";
import { showError, view } from "./dom.js";
import { clusterPage } from "./pages/cluster.js";
import { jobPage } from "./pages/job.js";
import { jobsPage } from "./pages/jobs.js";
import { loginPage } from "./pages/login.js";
import { missingPage } from "./pages/missing.js";
import { runPage } from "./pages/run.js";
import { runsPage } from "./pages/runs.js";
import { upcomingPage } from "./pages/upcoming.js";
import { navigated, session, setSession } from "./state.js";
import { zoneSelect } from "./time.js";

// -- login -----------------------------------------------------------------------------------------

function showLogin(message, kind = "error") {
  setSession(null);
  navigated();
  document.getElementById("nav").hidden = true;
  document.getElementById("logout").hidden = true;
  document.getElementById("whoami").textContent = "";
  loginPage(message, kind, loggedIn);
}

function loggedIn(opened) {
  setSession(opened);
  const caller = opened.caller;
  const teams = caller.teams === null ? "every team" : caller.teams.join(", ");
  document.getElementById("whoami").textContent = `${caller.name} · ${teams} · ${caller.scopes.join(", ")}`;
  for (const [page, action] of [["new", "create"], ["cluster", "cluster"]]) document.querySelector(`[data-nav=${page}]`).hidden = !can(action);
  document.getElementById("nav").hidden = false;
  document.getElementById("logout").hidden = false;
  route();
}

// -- routing ---------------------------------------------------------------------------------------

// The job form (its widgets and the YAML parser: most of the dashboard's bytes) loads when first opened.
const editor = () => import("./pages/editor.js");

const notAllowed = (action, what) => missingPage("not-allowed", what, `It needs the '${scopeOf(action)}' scope; this session has ${session.caller.scopes.join(", ")}.`);

function route() {
  if (!session) return;
  navigated();
  const [path, query] = (location.hash.slice(1) || "/jobs").split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  for (const link of document.querySelectorAll("[data-nav]")) link.classList.toggle("active", link.dataset.nav === parts[0]);
  const pages = {
    jobs: () => (parts[1] ? jobPage(parts[1]) : jobsPage(params)),
    runs: () => (parts[1] ? runPage(parts[1]) : runsPage(params)),
    new: () => (can("create") ? editor().then((m) => m.newJobPage()) : notAllowed("create", "the job form")),
    edit: () => (can("edit") ? editor().then((m) => m.editPage(parts[1])).catch((e) => (e.status === 404 ? missingPage("not-found", "job", e.message) : showError(view, e))) : notAllowed("edit", "the job form")),
    cluster: () => clusterPage(),
    upcoming: () => upcomingPage(params),
  };
  (pages[parts[0]] || pages.jobs)();
}

document.getElementById("logout").before(zoneSelect());
whenLoggedOut(() => showLogin("Your session ended: log in again."));
window.addEventListener("hashchange", route);
document.getElementById("logout").addEventListener("click", async () => {
  await logout();
  showLogin("Logged out.", "notice");
});

const opened = await currentSession().catch(() => null);
if (opened) loggedIn(opened);
else showLogin();
