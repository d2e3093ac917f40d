// Starting a run: pick a workflow, fill the input form generated from its
// input schema, and go to the new run's page.

import { ApiError, enc, get, post, withQuery } from "./api.js";
import { fill, h } from "./dom.js";
import { drawGraph } from "./graph.js";
import { schemaForm } from "./schema_form.js";

export function startView(main, query) {
  const chosen = query.get("workflow") || "";
  const select = h("select", { id: "start-workflow", name: "workflow", required: true });
  const formBox = h("div");
  const preview = h("div", { class: "preview" });
  const message = h("div", { class: "form-message", role: "alert" });
  const runId = h("input", { type: "text", id: "start-run-id", name: "run_id", autocomplete: "off" });
  const submit = h("button", { type: "submit", class: "primary" }, "Start run");
  let workflows = [];
  let form = null;

  const element = h(
    "form",
    { class: "card start", "aria-label": "Start a run", novalidate: true },
    h("div", { class: "field" }, h("label", { for: "start-workflow" }, "Workflow"), select),
    formBox,
    h("div", { class: "field" }, h("label", { for: "start-run-id" }, "Run id (optional)"), runId),
    h("div", { class: "actions" }, submit),
    message,
  );
  fill(main, h("h1", {}, "Start a run"), element, h("h2", {}, "Graph"), preview);

  function show(name) {
    const wf = workflows.find((w) => w.name === name);
    message.replaceChildren();
    if (!wf) {
      formBox.replaceChildren();
      preview.replaceChildren();
      form = null;
      return;
    }
    form = schemaForm(wf.input_schema || {}, { legend: `Input for ${wf.start || wf.name}`, idPrefix: "input" });
    fill(formBox, form.element);
    fill(preview, drawGraph(wf.graph || { nodes: [], edges: [] }, { title: `Graph of ${wf.name}` }).element);
  }

  select.addEventListener("change", () => {
    history.replaceState(null, "", withQuery("#/start", { workflow: select.value }));
    show(select.value);
  });

  element.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (!form) return;
    form.clearErrors();
    message.replaceChildren();
    const got = form.read();
    if (!got.ok) {
      form.showErrors(got.errors);
      fill(message, h("p", { class: "error" }, "Fix the fields marked above."));
      return;
    }
    submit.disabled = true;
    try {
      const body = { workflow: select.value, input: got.value };
      if (runId.value.trim()) body.run_id = runId.value.trim();
      const { run } = await post("/api/runs", body);
      location.hash = `#/runs/${enc(run.run_id)}`;
    } catch (error) {
      submit.disabled = false;
      if (!(error instanceof ApiError)) throw error;
      const left = form.showErrors(error.fields);
      fill(
        message,
        h("p", { class: "error" }, error.message),
        left.length ? h("ul", { class: "error" }, left.map((f) => h("li", {}, `${f.loc}: ${f.message}`))) : null,
      );
    }
  });

  get("/api/workflows")
    .then((answer) => {
      workflows = answer.workflows;
      fill(select, workflows.map((wf) => h("option", { value: wf.name, selected: wf.name === chosen }, `${wf.name} (v${wf.version})`)));
      if (!workflows.length) select.append(h("option", { value: "" }, "(no workflows served)"));
      show(select.value);
    })
    .catch((error) => fill(message, h("p", { class: "error" }, `Could not list workflows: ${error.message}`)));
  return () => {};
}
