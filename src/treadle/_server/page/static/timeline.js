// What a run's event log says, three ways: a timeline of supersteps and the
// invocations in each, the failures with their full tracebacks, and the raw
// events. Each takes the events one by one, in order, as the stream gives them.

import { duration, fill, h, seconds, when } from "./dom.js";

/** The mark an event leaves on its executor in the graph (undefined: none). */
export function markOf(event) {
  switch (event.type) {
    case "executor_invoked":
      return "running";
    case "executor_completed":
      return "ran";
    case "executor_failed":
      return event.data && event.data.retrying ? "retrying" : "failed";
    case "executor_suspended":
    case "request":
      return "waiting";
    default:
      return undefined;
  }
}

// What a person (or a service) did to the run, as the record keeps it: "maria approved at 10:02 (page)".
// The same sentences as `treadle logs` says (treadle._operations._audit._DONE).
const DONE = {
  run_created: "started the run",
  start_debounced: "gave the waiting run its input (debounce)",
  run_forked: "forked this run",
  message_sent: "sent a message",
  run_cancelled: "cancelled the run",
  run_paused: "paused the run",
  run_unpaused: "unpaused the run",
  run_resumed: "resumed the run",
  run_migrated: "migrated the run",
  run_pruned: "pruned the run's checkpoints",
};

function verdict(answer) {
  if (answer && typeof answer === "object") {
    const key = ["approved", "approve", "ok", "accepted"].find((k) => typeof answer[k] === "boolean");
    if (key) answer = answer[key];
  }
  if (typeof answer === "boolean") return answer ? "approved" : "rejected";
  return undefined;
}

function clock(at) {
  const time = new Date(typeof at === "number" ? at * 1000 : at);
  return time.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit", hour12: false });
}

/** An action of the record in a sentence (undefined: the event is the run's own). */
export function said(event) {
  const data = event.data || {};
  if (event.type === "request_timed_out") return `request ${data.request_id} timed out at ${clock(event.at)}`;
  const actor = data.actor;
  if (!actor || !actor.label) return undefined;
  let did;
  if (event.type === "request_answered") did = verdict(data.answer) || `answered ${data.request_id}`;
  else if (event.type === "run_paused" && data.outcome === "requested") did = "asked the run to pause";
  else did = DONE[event.type] || event.type.replaceAll("_", " ");
  return `${actor.label} ${did} at ${clock(event.at)} (${actor.door})`;
}

function describe(event) {
  const data = event.data || {};
  const action = said(event);
  if (action) return action;
  switch (event.type) {
    case "run_started":
      // A stored run taken up again (after an answer, a timer, a pause, its owner's end) is not a new start.
      if (!data.resumed) return "run started";
      if (data.from_status === "running") return `taken over by ${data.by || "another process"} (its last owner had stopped)`;
      return `resumed by ${data.by || "a process"} (was ${String(data.from_status || "stored").replace("_", " ")})`;
    case "status_changed":
      return `status: ${String(data.status || "").replace("_", " ")}${data.error ? ` (${data.error})` : ""}`;
    case "output":
      return `output: ${JSON.stringify(data.value)}`;
    case "request":
      return `${event.executor_id || "an executor"} asks for ${data.response_type || "an answer"} (request ${data.request_id})`;
    case "checkpoint_saved":
      return `checkpoint ${data.checkpoint_id}`;
    case "progress":
      return `progress${event.executor_id ? ` of ${event.executor_id}` : ""}: ${JSON.stringify(data)}`;
    case "executor_suspended":
      return `${event.executor_id} suspended`;
    default:
      return `${event.type}${event.executor_id ? ` (${event.executor_id})` : ""}: ${JSON.stringify(data)}`;
  }
}

/** Supersteps, each with its invocations (executor, attempt, outcome, time taken) and notes. */
export class Timeline {
  constructor() {
    this.steps = new Map();
    this.list = h("ol", { class: "timeline" });
    this.element = h("div", {}, h("p", { class: "muted empty" }, "No events yet."), this.list);
    this.pending = false;
  }

  step(number) {
    const key = number ?? -1;
    if (!this.steps.has(key)) this.steps.set(key, { number: key, start: null, end: null, calls: new Map(), notes: [] });
    return this.steps.get(key);
  }

  add(event) {
    const data = event.data || {};
    const step = this.step(event.superstep);
    const position = data.position ?? 0;
    const key = `${event.executor_id}#${position}`;
    switch (event.type) {
      case "superstep_started":
        step.start = event.at;
        for (const id of data.executor_ids || []) {
          if (![...step.calls.values()].some((c) => c.executor === id)) {
            step.calls.set(`${id}#?`, { executor: id, attempt: null, outcome: "scheduled", start: null, end: null });
          }
        }
        break;
      case "superstep_completed":
        step.end = event.at;
        break;
      case "executor_invoked": {
        step.calls.delete(`${event.executor_id}#?`);
        step.calls.set(key, { executor: event.executor_id, attempt: data.attempt ?? 1, outcome: "running", start: event.at, end: null });
        break;
      }
      case "executor_completed":
      case "executor_failed":
      case "executor_suspended": {
        const call = step.calls.get(key) || { executor: event.executor_id, attempt: data.attempt ?? null, start: null };
        call.end = event.at;
        if (event.type === "executor_completed") call.outcome = "completed";
        else if (event.type === "executor_suspended") call.outcome = "suspended";
        else call.outcome = data.retrying ? "failed, retrying" : data.routed_to ? `failed, routed to ${data.routed_to}` : "failed";
        if (event.type === "executor_failed" && data.error) call.error = `${data.error.type}: ${data.error.message}`;
        step.calls.set(key, call);
        break;
      }
      default:
        step.notes.push({ at: event.at, text: describe(event) });
    }
    if (!this.pending) {
      this.pending = true;
      requestAnimationFrame(() => {
        this.pending = false;
        this.render();
      });
    }
  }

  render() {
    this.element.querySelector(".empty").hidden = this.steps.size > 0;
    const items = [...this.steps.values()].sort((a, b) => a.number - b.number).slice(-200);
    fill(
      this.list,
      items.map((step) => {
        const calls = [...step.calls.values()];
        const took = step.start !== null && step.end !== null ? ` · ${duration(seconds(step.end) - seconds(step.start))}` : "";
        return h(
          "li",
          { class: "step", "data-superstep": step.number },
          h("h4", {}, step.number < 0 ? "Run" : `Superstep ${step.number}`, h("span", { class: "muted" }, step.start ? ` ${when(step.start)}${took}` : "")),
          calls.length
            ? h(
                "table",
                { class: "calls" },
                h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "Executor"), h("th", { scope: "col" }, "Attempt"), h("th", { scope: "col" }, "Outcome"), h("th", { scope: "col" }, "Took"))),
                h(
                  "tbody",
                  {},
                  calls.map((call) =>
                    h(
                      "tr",
                      { class: `call outcome-${call.outcome.split(",")[0]}` },
                      h("td", {}, h("code", {}, call.executor)),
                      h("td", {}, call.attempt ?? ""),
                      h("td", {}, call.outcome, call.error ? h("div", { class: "call-error" }, call.error) : null),
                      h("td", {}, call.start !== null && call.end !== null ? duration(seconds(call.end) - seconds(call.start)) : ""),
                    ),
                  ),
                ),
              )
            : null,
          step.notes.length ? h("ul", { class: "notes" }, step.notes.map((note) => h("li", {}, note.text))) : null,
        );
      }),
    );
  }
}

/** Every failure the events report, with its full traceback. */
export class Failures {
  constructor() {
    this.list = h("div", { class: "failures" });
    this.element = this.list;
    this.seen = new Set();
  }

  add(event) {
    if (event.type !== "executor_failed") return;
    const error = (event.data && event.data.error) || {};
    const data = event.data || {};
    const fate = data.retrying ? "will retry" : data.routed_to ? `routed to ${data.routed_to}` : "not retried";
    this.seen.add(error.traceback || "");
    this.list.append(
      h(
        "details",
        { class: "failure", open: !data.retrying },
        h(
          "summary",
          {},
          h("code", {}, event.executor_id),
          ` failed in superstep ${event.superstep} (attempt ${data.attempt ?? 1}, ${fate}): `,
          h("strong", {}, `${error.type || "Error"}: ${error.message || ""}`),
        ),
        h("pre", { class: "traceback" }, error.traceback || "(no traceback recorded)"),
      ),
    );
  }
}

/** The raw event log, newest last (at most the last 500 shown). */
export class EventLog {
  constructor() {
    this.count = 0;
    this.body = h("tbody");
    this.summary = h("summary", {}, "Events (0)");
    this.element = h(
      "details",
      { class: "events" },
      this.summary,
      h(
        "table",
        {},
        h("thead", {}, h("tr", {}, ["#", "At", "Step", "Type", "Executor", "Data"].map((t) => h("th", { scope: "col" }, t)))),
        this.body,
      ),
    );
  }

  add(event) {
    this.count += 1;
    this.summary.textContent = `Events (${this.count})`;
    const data = JSON.stringify(event.data);
    this.body.append(
      h(
        "tr",
        { "data-seq": event.seq },
        h("td", {}, event.seq),
        h("td", {}, when(event.at)),
        h("td", {}, event.superstep ?? ""),
        h("td", {}, event.type),
        h("td", {}, event.executor_id ? h("code", {}, event.executor_id) : ""),
        h("td", { class: "data" }, data.length > 300 ? `${data.slice(0, 300)}…` : data),
      ),
    );
    while (this.body.children.length > 500) this.body.firstElementChild.remove();
  }
}

