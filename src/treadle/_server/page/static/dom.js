// Small DOM helpers: the page builds its markup with h(), never from HTML
// strings, so nothing a run holds (ids, payloads, tracebacks) is ever parsed
// as markup.

/**
 * h("a", {href: "#/", class: "x", onclick: fn}, "text", child, [more]) -> Element.
 * Attributes named on* become listeners; `false`, null and undefined are left out.
 */
export function h(tag, attrs, ...children) {
  const svg = tag.startsWith("svg:");
  const el = svg
    ? document.createElementNS("http://www.w3.org/2000/svg", tag.slice(4))
    : document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === false || value === null || value === undefined) continue;
    if (name.startsWith("on") && typeof value === "function") {
      el.addEventListener(name.slice(2), value);
    } else if (name === "dataset") {
      Object.assign(el.dataset, value);
    } else if (!svg && (name === "value" || name === "checked" || name === "selected")) {
      el[name] = value;
    } else {
      el.setAttribute(name, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : String(child));
  }
}

/** Replaces everything inside `el` with `children`. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

/** Text from the API (a schema's description) with its `code` spans drawn as <code>. */
export function withCode(text) {
  return String(text)
    .split(/`([^`]+)`/)
    .map((part, i) => (i % 2 ? h("code", {}, part) : part));
}

/** A value as indented JSON in a <pre>. */
export function jsonBlock(value, label) {
  return h("pre", { class: "json", "aria-label": label || null }, JSON.stringify(value, null, 2));
}

/** A time as the API gives it (ISO 8601 with its offset) in seconds since the epoch; null: none. */
export function seconds(time) {
  if (time === null || time === undefined || time === "") return null;
  const ms = typeof time === "number" ? time * 1000 : Date.parse(time);
  return Number.isNaN(ms) ? null : ms / 1000;
}

/** The viewer's UTC offset at a moment, as "UTC+05:30" ("UTC" when it is UTC). */
function zoneOf(date) {
  const offset = -date.getTimezoneOffset();
  if (offset === 0) return "UTC";
  const sign = offset > 0 ? "+" : "-";
  const minutes = Math.abs(offset);
  const pad = (n) => String(n).padStart(2, "0");
  return `UTC${sign}${pad(Math.floor(minutes / 60))}:${pad(minutes % 60)}`;
}

/** An API time as the viewer's local "YYYY-MM-DD HH:MM:SS UTC+01:00": the zone always said. */
export function when(time) {
  const at = seconds(time);
  if (at === null) return "";
  const d = new Date(at * 1000);
  const pad = (n) => String(n).padStart(2, "0");
  return (
    `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ` +
    `${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())} ${zoneOf(d)}`
  );
}

/** Seconds as "0.42 s" / "12 s" / "3 min". */
export function duration(seconds) {
  if (seconds === null || seconds === undefined || Number.isNaN(seconds)) return "";
  if (seconds < 10) return `${seconds.toFixed(2)} s`;
  if (seconds < 120) return `${Math.round(seconds)} s`;
  return `${Math.round(seconds / 60)} min`;
}

/** A run status as a coloured badge (the colour is never the only sign: the word is there). */
export function statusBadge(status) {
  return h("span", { class: `badge status-${status}` }, String(status).replace("_", " "));
}

/** A run's named outcome (approved, rejected, ...) beside its status; its summary as a tooltip. */
export function outcomeBadge(run) {
  if (!run.outcome) return "";
  const attrs = { class: "badge outcome", "data-outcome": run.outcome };
  if (run.outcome_summary) attrs.title = run.outcome_summary;
  return h("span", attrs, run.outcome);
}

/** A run's calls waiting for call limits in a word, as the list marks it: "waiting: openai #3". */
export function waitingMark(waits) {
  const places = new Map();
  for (const wait of waits || []) places.set(wait.limit, [...(places.get(wait.limit) || []), wait.position + 1]);
  if (!places.size) return "";
  const shown = [...places].map(([limit, found]) => `${limit} #${Math.min(...found)}${found.length > 1 ? ` (${found.length} calls)` : ""}`);
  return h("span", { class: "waiting muted", title: "place in line of its call nearest the head (#1: next)" }, ` waiting: ${shown.join(", ")}`);
}

/** Tells the user something through the polite live region. */
export function notify(text, kind = "info") {
  const box = document.getElementById("notice");
  if (!box) return;
  fill(box, h("p", { class: `notice-${kind}` }, text));
  clearTimeout(notify.timer);
  notify.timer = setTimeout(() => box.replaceChildren(), 6000);
}

// treadle's own ids are UUID version 7 in hex: the time they were made, then
// random digits. Ids made in the same millisecond share their first twelve.
const MADE_BY_TREADLE = /^[0-9a-f]{12}7[0-9a-f]{19}$/;

/**
 * An id short enough for a table, the whole id in its tooltip: the random
 * end of one treadle made (its start is the time, alike for a whole batch),
 * else the start.
 */
export function shortId(id) {
  if (MADE_BY_TREADLE.test(id)) return `…${id.slice(-10)}`;
  return id.length > 14 ? `${id.slice(0, 12)}…` : id;
}

export const FINAL = new Set(["completed", "failed", "cancelled", "stalled"]);
export const STATUSES = [
  "queued",
  "pending",
  "running",
  "awaiting_input",
  "waiting",
  "paused",
  "completed",
  "failed",
  "cancelled",
  "stalled",
];
