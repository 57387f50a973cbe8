// A schedule's next fires as a list: each fire's UTC instant and local time, a fire that a DST change
// moves or repeats marked as such, and what a calendar does to it (the API's FireOut).

import { h, when } from "../dom.js";

export function fireItem(fire) {
  return h("li", { class: fire.calendar === "skipped" ? "skipped" : "", "data-kind": fire.kind },
    when(fire.utc), " · ", fire.at,
    fire.kind !== "normal" ? h("span", { class: "dst" }, ` (DST: ${fire.kind})`) : "",
    fire.calendar === "skipped" ? h("span", { class: "calendar" }, " (skipped: calendar)") : "",
    fire.calendar === "shifted" ? h("span", { class: "calendar" }, " (shifted from ", when(fire.shifted_from), ")") : "");
}

export const fireList = (fires, attrs = {}) => h("ul", attrs, fires.map(fireItem));
