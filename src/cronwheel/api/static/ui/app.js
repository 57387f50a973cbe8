// The cronwheel dashboard's entry point: hash routes (#/jobs, #/jobs/ID, #/runs/ID, #/new, #/edit/ID,
// #/cluster, #/upcoming), the navigation and the login and session wiring. Each page is a module of pages/, drawn
// from the /v1 API through the session bridge (api.js) with the helpers of dom.js (server text only
// ever as text) and redrawn by short polling; state.js holds the session and the navigation counter.

import { currentSession, logout, whenLoggedOut } from "./api.js";
import { showError, view } from "./dom.js";
import { clusterPage } from "./pages/cluster.js";
import { editPage, newJobPage } from "./pages/editor.js";
import { jobPage } from "./pages/job.js";
import { jobsPage } from "./pages/jobs.js";
import { loginPage } from "./pages/login.js";
import { runPage } from "./pages/run.js";
import { upcomingPage } from "./pages/upcoming.js";
import { navigated, session, setSession } from "./state.js";

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
  document.getElementById("nav").hidden = false;
  document.getElementById("logout").hidden = false;
  route();
}

// -- routing ---------------------------------------------------------------------------------------

function route() {
  if (!session) return;
  navigated();
  const [path, query] = (location.hash.slice(1) || "/jobs").split("?");
  const params = new URLSearchParams(query || "");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  for (const link of document.querySelectorAll("[data-nav]")) link.classList.toggle("active", link.dataset.nav === parts[0]);
  const pages = {
    jobs: () => (parts[1] ? jobPage(parts[1]) : jobsPage(params)),
    runs: () => runPage(parts[1]),
    new: () => newJobPage(),
    edit: () => editPage(parts[1]).catch((e) => showError(view, e)),
    cluster: () => clusterPage(),
    upcoming: () => upcomingPage(params),
  };
  (pages[parts[0]] || pages.jobs)();
}

whenLoggedOut(() => showLogin("Your session ended: log in again."));
window.addEventListener("hashchange", route);
document.getElementById("logout").addEventListener("click", async () => {
  await logout();
  showLogin("Logged out.", "notice");
});

const opened = await currentSession().catch(() => null);
if (opened) loggedIn(opened);
else showLogin();
