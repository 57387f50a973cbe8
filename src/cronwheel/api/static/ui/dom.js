// What every page of the dashboard draws with: h() (server text only ever goes in as text, never as
// HTML), the small widgets (badges, times, tables), errors, the confirm dialog and the polling redraw.

import { Problem } from "./api.js";
import { follow } from "./live.js";
import { generation, onLeave, session } from "./state.js";
import { clockTime, stamp } from "./time.js";

const POLL_MS = 2000;
const REFRESH_MS = 30000;
const GAP_MS = 1000;
export const view = document.getElementById("view");

export function h(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "class") node.className = value;
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

export const badge = (text, cls) => h("span", { class: `badge ${cls}` }, text);
export const stateBadge = (state) => (state ? badge(state, `state-${state}`) : h("span", { class: "muted" }, "never ran"));

export function when(iso) {
  if (!iso) return h("span", { class: "muted" }, "—");
  const date = new Date(iso);  // in the zone chosen (time.js), UTC on hover
  return h("time", { datetime: iso, title: stamp(date, true) }, h("span", { class: "stamp" }, stamp(date)), ` (${ago(date)})`);
}

// A job with no slot left (a one-time job that fired, an end_at that passed) is complete.
export function nextRun(paused, next) {
  if (paused) return h("span", { class: "muted" }, "paused");
  return next ? when(next) : h("span", { class: "muted" }, "complete");
}

export function ago(date) {
  const s = Math.round((date.getTime() - Date.now()) / 1000);
  const abs = Math.abs(s);
  if (abs < 2) return "now";
  const text = abs < 60 ? `${abs} s` : abs < 3600 ? `${Math.round(abs / 60)} min` : abs < 86400 ? `${Math.round(abs / 3600)} h` : `${Math.round(abs / 86400)} d`;
  return s >= 0 ? `in ${text}` : `${text} ago`;
}

export const seconds = (value) => (value === null || value === undefined ? "—" : `${value.toFixed(3)} s`);

export function kv(pairs) {
  return h("dl", { class: "kv" }, pairs.flatMap(([key, value]) => [h("dt", {}, key), h("dd", {}, value)]));
}

export function table(headers, rows, attrs = {}) {
  return h("table", attrs, h("thead", {}, h("tr", {}, headers.map((name) => h("th", {}, name)))), h("tbody", {}, rows));
}

export function showError(where, error) {
  const text = error instanceof Problem ? error.describe() : error.message || String(error);
  where.replaceChildren(h("div", { class: "error", role: "alert" }, text));
}

export function confirmDialog(text) {
  const dialog = document.getElementById("confirm");
  document.getElementById("confirm-text").textContent = text;
  return new Promise((resolve) => {
    dialog.addEventListener("close", () => resolve(dialog.returnValue === "ok"), { once: true });
    dialog.returnValue = "cancel";
    dialog.showModal();
  });
}

// Draws the page now and redraws it while it is shown: with `topics` (GET /v1/events, live.js),
// whenever the server says one of them changed, and every REFRESH_MS besides (times shown as "ago"
// and lateness move on when nothing changes); without topics, or where no event stream can be had,
// every POLL_MS. Redraws are at least GAP_MS apart (a busy team's stream of run events must not
// turn into a request after request): one asked for sooner, while one runs or while the tab is
// hidden, comes once, as soon as it may. `onEvent(event)`, when given, sees each event first and
// returns true when it has shown it itself (a run's output so far): then nothing is redrawn.
export function live(draw, status, topics = null, onEvent = null) {
  const mine = generation;
  let running = false;
  let pending = null; // the timer of the redraw that comes next
  let last = -Infinity;
  const redraw = async () => {
    if (mine !== generation || !session) return;
    const wait = last + GAP_MS - performance.now();
    if (running || document.hidden || wait > 0) {
      if (pending === null && !document.hidden) pending = setTimeout(later, Math.max(wait, 50));
      return;
    }
    running = true;
    last = performance.now();
    try {
      await draw();
      if (status) status.textContent = `live · updated ${clockTime(new Date())}`;
    } catch (error) {
      if (status) status.textContent = `live · ${error.message}`;
    } finally {
      running = false;
    }
  };
  const later = () => {
    pending = null;
    redraw();
  };
  const shown = () => {
    if (!document.hidden) redraw();
  };
  document.addEventListener("visibilitychange", shown);
  const refresh = setInterval(redraw, topics ? REFRESH_MS : POLL_MS);
  const heard = (event) => {
    if (event && onEvent && mine === generation && onEvent(event)) return;
    redraw();
  };
  const stop = topics ? follow(topics, heard, { pollMs: POLL_MS }) : () => {};
  onLeave(() => {
    stop();
    clearInterval(refresh);
    clearTimeout(pending);
    document.removeEventListener("visibilitychange", shown);
  });
  return redraw();
}

export function jobStatus(job) {
  if (job.paused) return badge("paused", "paused");
  return job.late ? badge("late", "late-job") : badge("active", "active-job");
}

export const svgNode = (tag, attrs = {}, ...children) => {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [key, value] of Object.entries(attrs)) node.setAttribute(key, value);
  node.append(...children);
  return node;
};
