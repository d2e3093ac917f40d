// Schedules: #/schedules lists them (times, next tick, state, last run) with Pause,
// Unpause and Trigger now; #/schedules/<id> shows one: its next times and its recent
// ticks with their runs' outcomes. Every button is a call of the API, as
// `treadle schedules pause | unpause | trigger` would make it; the record keeps who.

import { enc, get, post } from "./api.js";
import { fill, h, notify, shortId, statusBadge } from "./dom.js";

const REFRESH_MS = 3000;

// A tick's time as the API gives it: in the schedule's own time zone, with its offset.
const local = (iso) => iso.replace("T", " ");

function stateOf(schedule) {
  return schedule.paused ? `paused${schedule.note ? ` (${schedule.note})` : ""}` : "active";
}

function buttons(schedule, reload) {
  async function act(verb, label) {
    try {
      const answer = await post(`/api/schedules/${enc(schedule.id)}/${verb}`);
      notify(verb === "trigger" ? `Started run ${answer.run_id}` : `${label} ${schedule.id}`, "ok");
    } catch (error) {
      notify(`Could not ${verb} ${schedule.id}: ${error.message}`, "error");
    }
    reload();
  }
  const toggle = schedule.paused
    ? h("button", { type: "button", "data-action": "unpause" }, "Unpause")
    : h("button", { type: "button", "data-action": "pause" }, "Pause");
  toggle.addEventListener("click", () => act(schedule.paused ? "unpause" : "pause", schedule.paused ? "Unpaused" : "Paused"));
  const trigger = h("button", { type: "button", "data-action": "trigger" }, "Trigger now");
  trigger.addEventListener("click", () => act("trigger", "Triggered"));
  return [toggle, trigger];
}

export function schedulesView(main) {
  const body = h("tbody");
  const empty = h("p", { class: "muted", hidden: true }, "No schedules: `treadle schedules create ID --workflow NAME --cron EXPR` makes one.");
  const problem = h("div", { role: "alert" });
  let stopped = false;

  async function load() {
    let schedules;
    try {
      ({ schedules } = await get("/api/schedules"));
    } catch (error) {
      if (!stopped) fill(problem, h("p", { class: "error" }, `Could not list schedules: ${error.message}`));
      return;
    }
    if (stopped) return;
    problem.replaceChildren();
    body.replaceChildren(
      ...schedules.map((s) =>
        h(
          "tr",
          { "data-schedule": s.id },
          h("td", {}, h("a", { href: `#/schedules/${enc(s.id)}` }, s.id)),
          h("td", {}, h("code", {}, s.workflow)),
          h("td", {}, s.description),
          h("td", { "data-cell": "next" }, s.next_times.length ? local(s.next_times[0]) : "—"),
          h("td", { "data-cell": "state" }, stateOf(s)),
          h("td", {}, s.last_run_id ? h("a", { href: `#/runs/${enc(s.last_run_id)}`, title: s.last_run_id }, shortId(s.last_run_id)) : "—"),
          h("td", { class: "actions" }, ...buttons(s, load)),
        ),
      ),
    );
    empty.hidden = schedules.length > 0;
  }

  fill(
    main,
    h("h1", {}, "Schedules"),
    h("p", { class: "muted" }, "Runs that start themselves on time. Each tick starts one run, whichever process serves the store."),
    problem,
    empty,
    h(
      "table",
      { "aria-label": "Schedules" },
      h("thead", {}, h("tr", {}, ["Id", "Workflow", "When", "Next", "State", "Last run", ""].map((c) => h("th", { scope: "col" }, c)))),
      body,
    ),
  );
  load();
  const timer = setInterval(load, REFRESH_MS);
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}

export function scheduleView(main, scheduleId) {
  const head = h("div");
  const next = h("ol", { "aria-label": "Next times" });
  const ticks = h("tbody");
  const problem = h("div", { role: "alert" });
  let stopped = false;

  async function load() {
    let schedule;
    try {
      ({ schedule } = await get(`/api/schedules/${enc(scheduleId)}?next=5&ticks=20`));
    } catch (error) {
      if (!stopped) fill(problem, h("p", { class: "error" }, `Could not show schedule ${scheduleId}: ${error.message}`));
      return;
    }
    if (stopped) return;
    problem.replaceChildren();
    fill(
      head,
      h("p", {}, h("code", {}, schedule.workflow), ` · ${schedule.description} · overlap ${schedule.overlap} · `, h("span", { "data-cell": "state" }, stateOf(schedule))),
      h("p", { class: "actions" }, ...buttons(schedule, load)),
    );
    next.replaceChildren(...(schedule.next_times.length ? schedule.next_times.map((t) => h("li", {}, local(t))) : [h("li", { class: "muted" }, "none while paused")]));
    ticks.replaceChildren(
      ...schedule.ticks.map((t) =>
        h(
          "tr",
          { "data-tick": t.nominal },
          h("td", {}, local(t.nominal)),
          h("td", {}, t.source),
          h("td", {}, t.action),
          h("td", {}, t.run_id ? h("a", { href: `#/runs/${enc(t.run_id)}`, title: t.run_id }, shortId(t.run_id)) : "—"),
          h("td", { "data-cell": "outcome" }, t.run_outcome || (t.run_status ? statusBadge(t.run_status) : "—")),
          h("td", {}, t.detail || ""),
        ),
      ),
    );
  }

  fill(
    main,
    h("p", {}, h("a", { href: "#/schedules" }, "← Schedules")),
    h("h1", {}, `Schedule ${scheduleId}`),
    problem,
    head,
    h("h2", {}, "Next times"),
    next,
    h("h2", {}, "Recent ticks"),
    h(
      "table",
      { "aria-label": "Recent ticks" },
      h("thead", {}, h("tr", {}, ["Time", "Source", "Action", "Run", "Outcome", "Detail"].map((c) => h("th", { scope: "col" }, c)))),
      ticks,
    ),
  );
  load();
  const timer = setInterval(load, REFRESH_MS);
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}
