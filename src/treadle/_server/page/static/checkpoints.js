// A run's checkpoints (from /history) with "resume from here" and a fork
// form: a new run from a checkpoint, its state patched by a JSON object.

import { ApiError, enc, get, post } from "./api.js";
import { fill, h, notify, shortId, statusBadge, when } from "./dom.js";

/** What a checkpoint is, from its kind (the API tells them apart: a superstep may have several). */
export function checkpointWhat(cp) {
  switch (cp.kind) {
    case "start":
      return "start of the run";
    case "fork":
      return "start of this fork";
    case "progress":
      return `saved during superstep ${cp.superstep + 1}`;
    case "migration":
      return "migrated to another version";
    default:
      return `end of superstep ${cp.superstep}`;
  }
}

export class Checkpoints {
  constructor(runId) {
    this.runId = runId;
    this.body = h("tbody");
    this.forks = h("ul", { class: "forks" });
    this.checkpointSelect = h("select", { id: "fork-checkpoint", name: "checkpoint_id" });
    this.patch = h("textarea", { id: "fork-patch", name: "state_patch", rows: 3, class: "json-input", spellcheck: "false", placeholder: '{"key": "new value"}' });
    this.forkId = h("input", { type: "text", id: "fork-run-id", name: "run_id", autocomplete: "off" });
    this.message = h("div", { class: "form-message", role: "alert" });
    const forkForm = h(
      "form",
      { class: "fork", "aria-label": "Fork the run", novalidate: true },
      h("p", { class: "muted" }, "A new run from a checkpoint of this one; the state patch (a JSON object) replaces those keys of its state."),
      h("div", { class: "field" }, h("label", { for: "fork-checkpoint" }, "Checkpoint"), this.checkpointSelect),
      h("div", { class: "field" }, h("label", { for: "fork-patch" }, "State patch (JSON object, optional)"), this.patch),
      h("div", { class: "field" }, h("label", { for: "fork-run-id" }, "New run id (optional)"), this.forkId),
      h("div", { class: "actions" }, h("button", { type: "submit" }, "Fork run")),
      this.message,
    );
    forkForm.addEventListener("submit", (event) => {
      event.preventDefault();
      this.fork();
    });
    this.forkBox = h("details", { class: "fork card" }, h("summary", {}, "Fork from a checkpoint"), forkForm);
    this.element = h(
      "div",
      {},
      h(
        "table",
        { class: "checkpoints" },
        h("thead", {}, h("tr", {}, ["Superstep", "What", "Status", "Saved", "Checkpoint", ""].map((t) => h("th", { scope: "col" }, t)))),
        this.body,
      ),
      this.forkBox,
      h("h3", {}, "Forks of this run"),
      this.forks,
    );
  }

  async load() {
    // Loads overlap (a resume, then the events it causes, each ask for one) and their
    // answers may come back in any order: only the newest asked is drawn, so an older
    // answer never takes back rows, nor moves a row under a pointer about to click it.
    const asked = (this.asked = (this.asked || 0) + 1);
    const history = await get(`/api/runs/${enc(this.runId)}/history`);
    if (asked !== this.asked) return;
    const chosen = this.checkpointSelect.value;
    const checkpoints = history.checkpoints || [];
    fill(
      this.body,
      checkpoints.length
        ? checkpoints.map((cp) =>
            h(
              "tr",
              { "data-checkpoint": cp.checkpoint_id, "data-kind": cp.kind },
              h("td", { class: "num" }, cp.superstep),
              h("td", {}, checkpointWhat(cp)),
              h("td", {}, cp.status ? statusBadge(cp.status) : ""),
              h("td", {}, when(cp.created_at)),
              h("td", {}, h("code", { title: cp.checkpoint_id }, shortId(cp.checkpoint_id))),
              h(
                "td",
                { class: "row-actions" },
                h("button", { type: "button", onclick: () => this.resume(cp) }, "Resume from here"),
                h("button", { type: "button", onclick: () => this.chooseForFork(cp) }, "Fork…"),
              ),
            ),
          )
        : h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No checkpoints yet.")),
    );
    fill(
      this.checkpointSelect,
      checkpoints.map((cp) => h("option", { value: cp.checkpoint_id }, `superstep ${cp.superstep} · ${checkpointWhat(cp)} · ${shortId(cp.checkpoint_id)}`)),
    );
    if (chosen && checkpoints.some((cp) => cp.checkpoint_id === chosen)) this.checkpointSelect.value = chosen;
    else if (checkpoints.length) this.checkpointSelect.value = checkpoints[checkpoints.length - 1].checkpoint_id;
    const forks = history.forks || [];
    fill(
      this.forks,
      forks.length
        ? forks.map((run) => h("li", {}, h("a", { href: `#/runs/${enc(run.run_id)}` }, h("code", {}, run.run_id)), " ", statusBadge(run.status)))
        : h("li", { class: "muted" }, "None."),
    );
  }

  chooseForFork(cp) {
    this.checkpointSelect.value = cp.checkpoint_id;
    this.forkBox.open = true;
    this.forkBox.scrollIntoView({ block: "nearest" });
    this.patch.focus();
  }

  async resume(cp) {
    try {
      await post(`/api/runs/${enc(this.runId)}/resume`, { checkpoint_id: cp.checkpoint_id });
      notify(`Resumed from superstep ${cp.superstep} (${checkpointWhat(cp)}).`, "ok");
      if (this.onChange) this.onChange();
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      notify(`Could not resume: ${error.message}`, "error");
    }
  }

  async fork() {
    this.message.replaceChildren();
    const body = { checkpoint_id: this.checkpointSelect.value };
    const text = this.patch.value.trim();
    if (text) {
      try {
        body.state_patch = JSON.parse(text);
      } catch (error) {
        fill(this.message, h("p", { class: "error" }, `The state patch is not valid JSON: ${error.message}`));
        return;
      }
    }
    if (this.forkId.value.trim()) body.run_id = this.forkId.value.trim();
    try {
      const { run } = await post(`/api/runs/${enc(this.runId)}/fork`, body);
      location.hash = `#/runs/${enc(run.run_id)}`;
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      const fields = error.fields.map((f) => h("li", {}, `${f.loc}: ${f.message}`));
      fill(this.message, h("p", { class: "error" }, `Could not fork: ${error.message}`), fields.length ? h("ul", { class: "error" }, fields) : null);
    }
  }
}
