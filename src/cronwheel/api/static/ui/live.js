// Live pages: hear of changes from the server instead of polling (GET /v1/events through the
// session bridge, cronwheel/api/routes/ui.py and cronwheel/api/routes/events.py).
//
// Contract:
//   const stop = follow(topics, onChange, options);
//   - topics: an array of topic names, as GET /v1/events takes them: "jobs", "runs", "cluster",
//     `job:${id}`, `run:${id}` (a job or run of another team answers 404: the stream fails and
//     follow() falls back to polling).
//   - onChange(event) is called for each change: event = { type, data } where type is "job"
//     (data {id, team, version} or {id, team, deleted: true}), "run" ({id, job_id, team, state}),
//     "output" ({id, job_id, team, attempt, output, at}: a running attempt's output so far, up to
//     64 KiB, heard only by streams following `run:${id}`), "cluster" ({}) or "reload" ({}:
//     changes may have been missed, re-read everything). It is
//     also called with type "reload" each time the stream (re)opens, since what changed while it
//     was closed is unknown.
//   - onChange(null) is called every options.pollMs (2000 by default) instead when the browser
//     has no EventSource, or the stream failed options.failures (3 by default) times in a row
//     without opening: the page then re-reads what it shows, as it did by polling.
//   - stop() closes the stream or ends the polling; onChange is not called after it.
//   - options.EventSource replaces the browser's (null: as if it had none; tests use it).
// The URL is relative to the page (as api.js builds its own), so it works behind a proxy's prefix.
// The session cookie goes with it; an EventSource sends no CSRF header, which the bridge allows
// for this one read.

const POLL_MS = 2000;
const FAILURES = 3;
const TYPES = ["job", "run", "output", "cluster", "reload"];

export function follow(topics, onChange, options = {}) {
  const pollMs = options.pollMs ?? POLL_MS;
  const failures = options.failures ?? FAILURES;
  const EventSourceClass = "EventSource" in options ? options.EventSource : globalThis.EventSource;
  let stopped = false;
  let source = null;
  let timer = null;
  let failed = 0;

  const tell = (event) => {
    if (!stopped) onChange(event);
  };

  const poll = () => {
    if (source) source.close();
    source = null;
    if (timer === null && !stopped) timer = setInterval(() => tell(null), pollMs);
  };

  const open = () => {
    const query = new URLSearchParams({ topics: topics.join(",") });
    source = new EventSourceClass(`api/v1/events?${query}`, { withCredentials: true });
    source.onopen = () => {
      failed = 0;
      tell({ type: "reload", data: {} });
    };
    source.onerror = () => {
      // The browser reconnects by itself (after the stream's `retry`) unless the answer was not a
      // stream (an error status): then readyState is CLOSED. Either way count it.
      failed += 1;
      if (failed >= failures || source.readyState === EventSourceClass.CLOSED) poll();
    };
    for (const type of TYPES) {
      source.addEventListener(type, (message) => {
        let data = {};
        try {
          data = JSON.parse(message.data);
        } catch {
          data = {};
        }
        tell({ type, data });
      });
    }
  };

  if (typeof EventSourceClass === "function") open();
  else poll();

  return function stop() {
    stopped = true;
    if (source) source.close();
    source = null;
    if (timer !== null) clearInterval(timer);
    timer = null;
  };
}
