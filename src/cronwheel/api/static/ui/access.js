// What the session's caller may do, from its scopes and teams (/ui/session): the one map of a
// dashboard action to the API scope its route requires (cronwheel/auth/identity.py's Scope, checked
// in cronwheel/api/operations.py). The page only hides what the API would refuse; the API decides.

import { session } from "./state.js";

const ADMIN = "admin"; // includes every other scope

export const ACTIONS = {
  create: "write", // POST /v1/jobs
  edit: "write", // PUT /v1/jobs/{id}
  delete: "write", // DELETE /v1/jobs/{id}
  pause: "write", // POST /v1/jobs/{id}/pause
  resume: "write", // POST /v1/jobs/{id}/resume
  trigger: "trigger", // POST /v1/jobs/{id}/trigger
  backfill: "trigger", // POST /v1/jobs/{id}/backfills
  cancelBackfill: "trigger", // POST /v1/jobs/{id}/backfills/{b}/cancel
  cluster: ADMIN, // GET /v1/cluster, which also needs every team
};

// Actions whose objects are not one team's: the caller must see every team (teams null).
const EVERY_TEAM = new Set(["cluster"]);

// The scope `action` needs.
export const scopeOf = (action) => ACTIONS[action];

export function can(action, caller = session && session.caller) {
  const scope = ACTIONS[action];
  if (!caller || !scope) return false;
  if (EVERY_TEAM.has(action) && caller.teams !== null) return false;
  return caller.scopes.includes(ADMIN) || caller.scopes.includes(scope);
}
