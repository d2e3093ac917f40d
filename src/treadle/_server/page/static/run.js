// A run's page: its header and buttons, failures with full tracebacks, the
// requests it waits on (with answer forms), the graph coloured live from the
// run's event stream, outputs, state, a timeline of supersteps, checkpoints
// with resume and fork, and the raw events. The event stream drives it: each
// event marks the graph and the timeline; the kinds that change what
// GET /api/runs/{id} says trigger a (debounced) reload of it.

import { ApiError, del, enc, get, post } from "./api.js";
import { fill, FINAL, h, jsonBlock, notify, outcomeBadge, shortId, statusBadge, when } from "./dom.js";
import { Checkpoints } from "./checkpoints.js";
import { drawGraph, legend } from "./graph.js";
import { syncCards } from "./requests.js";
import { EventLog, Failures, markOf, Timeline } from "./timeline.js";

const KINDS = [
  "run_started",
  "superstep_started",
  "superstep_completed",
  "executor_invoked",
  "executor_completed",
  "executor_failed",
  "executor_suspended",
  "request",
  "output",
  "progress",
  "custom",
  "checkpoint_saved",
  "status_changed",
  // The record: what people and services did to the run, each with its actor (the timeline says who).
  "run_created",
  "start_debounced",
  "request_answered",
  "request_timed_out",
  "message_sent",
  "run_cancelled",
  "run_paused",
  "run_unpaused",
  "run_resumed",
  "run_forked",
  "run_migrated",
  "run_pruned",
];
const RELOAD_ON = new Set(["status_changed", "output", "request", "checkpoint_saved", "superstep_completed", "run_started"]);
const HISTORY_ON = new Set(["checkpoint_saved", "status_changed"]);

const WAIT_REFRESH_MS = 2000; // a waiting call's place in line moves without an event

/** What the run's calls wait for: each call limit, its key, its place in line, when a slot is next expected. */
function waitsView(waits) {
  if (!waits.length) return "";
  const place = (ahead) => (ahead === 0 ? "next in line" : `${ahead} call${ahead === 1 ? "" : "s"} ahead`);
  return h(
    "ul",
    { class: "waits", "aria-label": "Waiting for call limits" },
    waits.map((wait) =>
      h(
        "li",
        { "data-limit": wait.limit },
        "waiting for limit ",
        h("code", {}, wait.limit),
        wait.key ? [" (key ", h("code", {}, wait.key), ")"] : "",
        `: ${place(wait.position)}`,
        wait.next_slot_at ? ` · next slot expected ${when(wait.next_slot_at)}` : " · next slot when a call releases one",
      ),
    ),
  );
}

function section(title, id, ...children) {
  return h("section", { "aria-labelledby": `${id}-title`, id }, h("h2", { id: `${id}-title` }, title), ...children);
}

/** One conversation of the run's agents: a message per entry, its role, text and tool calls in short. */
function conversationView(talk) {
  return h(
    "ol",
    { class: "conversation", "aria-label": `Conversation of ${talk.agents.join(", ")} (state key ${talk.key})` },
    talk.messages.map((message) =>
      h(
        "li",
        { class: `message role-${message.role}` },
        h("span", { class: "role" }, message.role),
        message.text ? h("p", { class: "text" }, message.text) : null,
        message.tool_calls.length
          ? h("ul", { class: "tool-calls" }, message.tool_calls.map((call) => h("li", {}, "calls ", h("code", {}, `${call.tool}(${call.args})`))))
          : null,
        message.tool_results.length
          ? h(
              "ul",
              { class: "tool-results" },
              message.tool_results.map((result) => h("li", {}, result.retry ? "retry asked of " : "", h("code", {}, result.tool || "tool"), result.retry ? ": " : " returned: ", result.content)),
            )
          : null,
      ),
    ),
  );
}

export function runView(main, given) {
  let runId = given;
  let stopped = false;
  let source = null;
  let lastSeq = 0;
  let reloadTimer = null;
  let retryTimer = null;
  let graph = null;

  const header = h("div", { class: "run-header" });
  const actions = h("div", { class: "actions run-actions", role: "group", "aria-label": "Run actions" });
  const live = h("span", { class: "live muted", "aria-live": "polite" });
  const problem = h("div", { role: "alert" });
  const errorBox = h("div", { class: "run-error" });
  const requestList = h("div", { class: "cards" });
  const cards = new Map();
  const graphBox = h("div");
  const outputs = h("div");
  const stateBox = h("div");
  const conversationBox = h("div");
  const timeline = new Timeline();
  const failures = new Failures();
  const events = new EventLog();
  const checkpoints = new Checkpoints(runId);
  const requestsSection = section("Waiting for an answer", "requests", requestList);
  const failuresSection = section("Failures", "failures", failures.element);
  requestsSection.hidden = true;
  failuresSection.hidden = true;

  fill(
    main,
    header,
    actions,
    problem,
    errorBox,
    requestsSection,
    section("Graph", "graph", legend(), graphBox),
    section("Outputs", "outputs", outputs),
    section("Conversation", "conversation", conversationBox),
    section("State", "state", stateBox),
    section("Timeline", "timeline", live, timeline.element),
    failuresSection,
    section("Checkpoints", "checkpoints", checkpoints.element),
    section("Event log", "event-log", events.element),
  );

  function button(label, action, enabled) {
    return h("button", { type: "button", disabled: !enabled, onclick: () => act(action, label) }, label);
  }

  async function act(action, label) {
    try {
      if (action === "delete") {
        if (!confirm(`Delete run ${runId} and its checkpoints?`)) return;
        await del(`/api/runs/${enc(runId)}`);
        notify(`Deleted run ${runId}.`, "ok");
        location.hash = "#/runs";
        return;
      }
      await post(`/api/runs/${enc(runId)}/${action}`);
      notify(`${label}: done.`, "ok");
      changed();
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      notify(`${label} refused: ${error.message}`, "error");
    }
  }

  /** After anything that may move the run: reload it and listen again if the stream had ended. */
  function changed() {
    scheduleReload(0);
    checkpoints.load().catch(() => {});
    if (!source) openStream();
  }
  checkpoints.onChange = changed;

  function renderRun(detail) {
    const run = detail.run;
    fill(
      header,
      h("h1", {}, "Run ", h("code", { class: "run-id" }, run.run_id), " ", statusBadge(run.status), outcomeBadge(run)),
      run.outcome_summary ? h("p", { class: "outcome-summary" }, run.outcome_summary) : "",
      h(
        "p",
        { class: "muted" },
        "workflow ",
        h("a", { href: `#/runs?workflow=${enc(run.workflow)}` }, run.workflow),
        ` version ${run.version}`,
        ` · superstep ${run.superstep}`,
        ` · started ${when(run.created_at)} · updated ${when(run.updated_at)}`,
        run.parent_run_id ? [" · forked from ", h("a", { href: `#/runs/${enc(run.parent_run_id)}` }, h("code", {}, shortId(run.parent_run_id)))] : "",
        detail.wake_at ? ` · wakes at ${when(detail.wake_at)}` : "",
        run.deadline_at ? ` · deadline ${when(run.deadline_at)}` : "",
        run.parked ? " · parked" : "",
        run.pause_requested ? " · pause requested" : "",
      ),
      waitsView(detail.waiting_for || []),
    );
    if ((detail.waiting_for || []).length) scheduleReload(WAIT_REFRESH_MS);
    const final = FINAL.has(run.status);
    fill(
      actions,
      button("Cancel", "cancel", !final),
      button("Pause", "pause", !final && !["paused", "queued"].includes(run.status)),
      button("Unpause", "unpause", run.status === "paused"),
      button("Resume", "resume", !["queued", "pending", "running", "completed", "cancelled"].includes(run.status)),
      button("Delete", "delete", true),
    );
    const traceback = detail.traceback;
    fill(
      errorBox,
      run.error || traceback
        ? h(
            "section",
            { class: "error-box", "aria-labelledby": "run-error-title" },
            h("h2", { id: "run-error-title" }, "Error"),
            run.error ? h("p", { class: "error" }, run.error) : null,
            traceback ? h("pre", { class: "traceback", "aria-label": "traceback" }, traceback) : null,
          )
        : null,
    );
    // One answered already (kept until the run goes on) asks nobody: no card for it.
    const pending = (detail.pending_requests || []).filter((request) => !request.answered);
    // An ended run waits for nothing: its answered cards go at once.
    syncCards(requestList, pending, cards, { showRun: false, onAnswered: () => scheduleReload(0) }, final);
    requestsSection.hidden = cards.size === 0;
    fill(
      outputs,
      detail.outputs && detail.outputs.length
        ? h("ol", { class: "outputs" }, detail.outputs.map((value, i) => h("li", {}, jsonBlock(value, `output ${i + 1}`))))
        : h("p", { class: "muted" }, final ? "No outputs." : "No outputs yet."),
    );
    const talks = detail.conversations || [];
    conversationBox.parentElement.hidden = talks.length === 0;
    fill(conversationBox, talks.map(conversationView));
    // The conversations are shown above as conversations: the state's JSON leaves them out.
    const state = { ...(detail.state || {}) };
    for (const talk of talks) delete state[talk.key];
    fill(
      stateBox,
      Object.keys(state).length ? jsonBlock(state, "state") : h("p", { class: "muted" }, "Empty."),
      talks.length ? h("p", { class: "muted" }, `Not shown here: ${talks.map((t) => t.key).join(", ")} (the conversation above).`) : null,
    );
    if (!graph && detail.graph) {
      graph = drawGraph(detail.graph, { title: `Graph of ${run.workflow}` });
      fill(graphBox, graph.element);
      replayMarks();
    }
  }

  const marks = new Map();
  function replayMarks() {
    if (graph) for (const [id, what] of marks) graph.mark(id, what);
  }

  async function reload() {
    reloadTimer = null;
    try {
      const detail = await get(`/api/runs/${enc(runId)}`);
      if (stopped) return;
      problem.replaceChildren();
      runId = detail.run.run_id;
      checkpoints.runId = runId;
      renderRun(detail);
    } catch (error) {
      if (stopped) return;
      if (error instanceof ApiError && error.status === 404) {
        fill(main, h("h1", {}, "No such run"), h("p", {}, error.message), h("p", {}, h("a", { href: "#/runs" }, "All runs")));
        stopped = true;
        closeStream();
        return;
      }
      fill(problem, h("p", { class: "error" }, `Could not load the run: ${error.message}`));
    }
  }

  function scheduleReload(delay = 150) {
    if (stopped) return;
    if (reloadTimer !== null) clearTimeout(reloadTimer);
    reloadTimer = setTimeout(reload, delay);
  }

  function onEvent(message) {
    let event;
    try {
      event = JSON.parse(message.data);
    } catch {
      return;
    }
    // A live event (progress before its superstep commits: "seq": null) is left to the
    // log's copy, which follows at the barrier: the page lists what committed, once.
    if (typeof event.seq !== "number") return;
    if (event.seq <= lastSeq) return; // seen already (a reconnect never repeats, but be sure)
    lastSeq = event.seq;
    const what = markOf(event);
    if (what && event.executor_id) {
      marks.set(event.executor_id, what);
      if (graph) graph.mark(event.executor_id, what);
    }
    if (event.type === "status_changed" && event.data && FINAL.has(event.data.status)) {
      for (const [id, mark] of marks) if (mark === "running") marks.set(id, "ran");
      replayMarks();
    }
    timeline.add(event);
    failures.add(event);
    failuresSection.hidden = failures.list.childElementCount === 0;
    events.add(event);
    if (RELOAD_ON.has(event.type)) scheduleReload();
    if (HISTORY_ON.has(event.type)) checkpoints.load().catch(() => {});
  }

  function openStream() {
    if (stopped || source) return;
    const url = `/api/runs/${enc(runId)}/events${lastSeq ? `?after=${lastSeq}` : ""}`;
    source = new EventSource(url, { withCredentials: true });
    live.textContent = "● live";
    for (const kind of KINDS) source.addEventListener(kind, onEvent);
    source.addEventListener("message", onEvent);
    source.addEventListener("end", () => {
      closeStream();
      live.textContent = "the run has ended; every event is shown";
      scheduleReload(0);
    });
    source.addEventListener("error", () => {
      // The browser reconnects by itself (sending Last-Event-ID) unless the
      // server refused the stream; then try again in a while, from the last event.
      if (source && source.readyState === EventSource.CLOSED) {
        closeStream();
        live.textContent = "live updates lost; retrying…";
        retryTimer = setTimeout(openStream, 3000);
      } else {
        live.textContent = "reconnecting…";
      }
    });
    source.addEventListener("open", () => {
      live.textContent = "● live";
    });
  }

  function closeStream() {
    if (source) source.close();
    source = null;
  }

  reload().then(() => {
    if (stopped) return;
    openStream();
    checkpoints.load().catch((error) => notify(`Could not load checkpoints: ${error.message}`, "error"));
  });

  return () => {
    stopped = true;
    closeStream();
    clearTimeout(reloadTimer);
    clearTimeout(retryTimer);
  };
}
