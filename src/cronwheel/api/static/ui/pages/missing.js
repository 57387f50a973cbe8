// The page shown instead of what the caller cannot see: "Not found" (a missing job or run, or
// another team's, which the API answers alike) or "Not allowed" (a scope the caller lacks), each
// with a way back.

import { Problem } from "../api.js";
import { h, view } from "../dom.js";
import { generation, navigated } from "../state.js";

const TITLES = { "not-found": "Not found", "not-allowed": "Not allowed" };
const WHY = {
  "not-found": (what) => `There is no ${what} here: it does not exist, was deleted, or belongs to a team this session does not see.`,
  "not-allowed": (what) => `This session may not open ${what}.`,
};

export function missingPage(kind, what, detail) {
  view.replaceChildren(h("div", { class: "missing card", id: "missing", "data-kind": kind, role: "alert" },
    h("h1", {}, TITLES[kind]),
    h("p", {}, WHY[kind](what)),
    detail ? h("p", { class: "muted" }, detail) : "",
    h("p", {}, h("a", { href: "#/jobs", id: "back-to-jobs" }, "← Back to the jobs"), " · ",
      h("a", { href: "#", id: "go-back", onclick: (event) => { event.preventDefault(); history.back(); } }, "the previous page"))));
}

// `draw` of a page about `what`, whose 404 or 403 from the API shows missingPage in its place and
// stops the page's polling.
export function orMissing(draw, what) {
  const mine = generation;
  return async () => {
    try {
      await draw();
    } catch (error) {
      if (!(error instanceof Problem) || ![403, 404].includes(error.status)) throw error;
      if (mine !== generation) return; // the viewer has moved on
      navigated();
      missingPage(error.status === 404 ? "not-found" : "not-allowed", what, error.message);
    }
  };
}
