// The dashboard's state that its modules share, each defined here once: the navigation counter and
// the session. Importers read both live (ES module bindings); only the functions below change them.

export let generation = 0; // bumped at each navigation: a stale page's poll stops
export let session = null; // the session's caller and CSRF token (/ui/session's answer), or null

export function navigated() {
  generation += 1;
}

export function setSession(opened) {
  session = opened;
}
