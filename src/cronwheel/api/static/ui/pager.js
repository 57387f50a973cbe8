// A cursor pager for a list the API pages (`next_cursor`): Previous goes back through the cursors
// seen, Next follows the last page's cursor. The page that owns it reads `cursor()` to fetch, and
// tells it each page it drew with `shown(page)`.

import { h } from "./dom.js";

export function cursorPager(go, { prefix = "", noun = "items" } = {}) {
  const cursors = [null]; // the cursor of each page seen so far
  let next = null;
  const prev = h("button", { type: "button", id: `${prefix}prev`, disabled: true }, "← Previous");
  const nextButton = h("button", { type: "button", id: `${prefix}next`, disabled: true }, "Next →");
  const where = h("span", { class: "muted", id: `${prefix}where` });
  prev.addEventListener("click", () => { if (cursors.length > 1) { cursors.pop(); go(); } });
  nextButton.addEventListener("click", () => { if (next) { cursors.push(next); go(); } });
  return {
    element: h("div", { class: "pager" }, prev, nextButton, where),
    cursor: () => cursors[cursors.length - 1],
    first: () => cursors.length === 1,
    shown(page) {
      next = page.next_cursor;
      prev.disabled = cursors.length === 1;
      nextButton.disabled = !next;
      where.textContent = `page ${cursors.length} · ${page.items.length} ${noun}`;
    },
  };
}
