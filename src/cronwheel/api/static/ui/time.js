// How the dashboard shows an instant: in the viewer's zone (the browser's) or in UTC, as the viewer
// chose in the header (remembered in localStorage), with the UTC time on hover. Every time of every
// page is written by stamp() (dom.js's when() and the live status use it).

const KEY = "cronwheel.zone";
let chosen = null; // the choice of this page, when storage refuses to keep it

// The zone chosen: "local" (the default) or "utc".
export function zoneChoice() {
  if (chosen) return chosen;
  try {
    return localStorage.getItem(KEY) === "utc" ? "utc" : "local";
  } catch {
    return "local";
  }
}

// The two formats, made once (a page formats hundreds of instants at each redraw).
const FORMATS = Object.fromEntries([false, true].map((utc) => [utc, new Intl.DateTimeFormat("en-CA", {
  timeZone: utc ? "UTC" : undefined, hourCycle: "h23", timeZoneName: "short",
  year: "numeric", month: "2-digit", day: "2-digit", hour: "2-digit", minute: "2-digit", second: "2-digit",
})]));

// "2026-12-07 17:43:22 CET" in the viewer's zone, "2026-12-07 16:43:22 UTC" in UTC.
export function stamp(date, utc = zoneChoice() === "utc") {
  const p = Object.fromEntries(FORMATS[utc].formatToParts(date).map((part) => [part.type, part.value]));
  return `${p.year}-${p.month}-${p.day} ${p.hour}:${p.minute}:${p.second} ${utc ? "UTC" : p.timeZoneName}`;
}

// The time of day alone ("17:43:22 CET"), for what happened just now.
export const clockTime = (date) => stamp(date).slice(11);

// Rewrites every shown instant (a <time> holding a .stamp) in the zone chosen.
export function restamp(root = document) {
  for (const node of root.querySelectorAll("time[datetime] .stamp")) node.textContent = stamp(new Date(node.parentNode.dateTime));
}

// The header's choice of zone: remembered, and applied at once to the page shown.
export function zoneSelect() {
  const select = document.createElement("select");
  select.id = "zone";
  select.title = "Show times in";
  select.setAttribute("aria-label", "Show times in");
  const local = Intl.DateTimeFormat().resolvedOptions().timeZone || "local";
  for (const [value, text] of [["local", `Local time (${local})`], ["utc", "UTC"]]) select.append(new Option(text, value, false, value === zoneChoice()));
  select.addEventListener("change", () => {
    chosen = select.value;
    try {
      localStorage.setItem(KEY, select.value);
    } catch {
      // storage refused (a private window): the choice holds for this page only
    }
    restamp();
  });
  return select;
}
