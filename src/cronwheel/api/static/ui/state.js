// The dashboard's state that its modules share, each defined here once: the navigation counter (and
// what a page stops when it is left) and the session. Importers read both live (ES module bindings); only the functions below change them.

export let generation = 0; // bumped at each navigation: a stale page's poll stops
export let session = null; // the session's caller and CSRF token (/ui/session's answer), or null

const leaving = new Set(); // what the shown page stops when the viewer leaves it (its event stream)

export function navigated() {
  generation += 1;
  for (const stop of leaving) stop();
  leaving.clear();
}

export function onLeave(stop) {
  leaving.add(stop);
}

export function setSession(opened) {
  session = opened;
}
