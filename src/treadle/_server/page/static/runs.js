// The runs list: newest first, filtered by status, workflow, outcome and a
// search (a filter of docs/search.md, passed as ?where=), paged by the API's
// next_cursor, and refreshed every two seconds while shown.

import { enc, get, withQuery } from "./api.js";
import { fill, h, outcomeBadge, shortId, statusBadge, STATUSES, waitingMark, when } from "./dom.js";

const PAGE_SIZE = 25;
const REFRESH_MS = 2000;

export function runsView(main, query) {
  const status = query.get("status") || "";
  const workflow = query.get("workflow") || "";
  const outcome = query.get("outcome") || "";
  const search = query.get("where") || "";
  const limit = Math.min(Math.max(Number(query.get("limit")) || PAGE_SIZE, 1), 200);
  const cursors = [null]; // the cursor of every page seen so far; the last is the one shown
  let stopped = false;

  const statusSelect = h(
    "select",
    { id: "filter-status", name: "status" },
    h("option", { value: "" }, "any status"),
    STATUSES.map((s) => h("option", { value: s, selected: s === status }, s.replace("_", " "))),
  );
  const workflowSelect = h("select", { id: "filter-workflow", name: "workflow" }, h("option", { value: "" }, "any workflow"));
  if (workflow) workflowSelect.append(h("option", { value: workflow, selected: true }, workflow));
  const outcomeInput = h("input", { id: "filter-outcome", name: "outcome", type: "search", value: outcome, placeholder: "any outcome", size: 12 });
  const searchInput = h("input", {
    id: "filter-where",
    name: "where",
    type: "search",
    value: search,
    placeholder: 'fields.customer == "42" && status == "awaiting_input"',
    size: 48,
    "aria-describedby": "filter-where-help",
  });
  const applyFilters = () => {
    location.hash = withQuery("#/runs", {
      status: statusSelect.value,
      workflow: workflowSelect.value,
      outcome: outcomeInput.value.trim(),
      where: searchInput.value.trim(),
      limit: query.get("limit"),
    });
  };
  statusSelect.addEventListener("change", applyFilters);
  workflowSelect.addEventListener("change", applyFilters);
  outcomeInput.addEventListener("change", applyFilters);
  searchInput.addEventListener("change", applyFilters);

  const body = h("tbody");
  const newer = h("button", { type: "button", disabled: true }, "← Newer");
  const older = h("button", { type: "button", disabled: true }, "Older →");
  const where = h("span", { class: "muted" });
  const problem = h("div", { role: "alert" });

  fill(
    main,
    h("h1", {}, "Runs"),
    h(
      "form",
      { class: "filters", role: "search", "aria-label": "Filter runs", onsubmit: (e) => e.preventDefault() },
      h("label", { for: "filter-status" }, "Status "),
      statusSelect,
      h("label", { for: "filter-workflow" }, "Workflow "),
      workflowSelect,
      h("label", { for: "filter-outcome" }, "Outcome "),
      outcomeInput,
      h("label", { for: "filter-where" }, "Search "),
      searchInput,
      h("span", { id: "filter-where-help", class: "muted" }, "a filter: status, outcome, workflow, fields.NAME (docs/search.md)"),
    ),
    problem,
    h(
      "table",
      { class: "runs" },
      h("caption", { class: "visually-hidden" }, "Runs, newest first"),
      h(
        "thead",
        {},
        h("tr", {}, ["Run", "Workflow", "Status", "Superstep", "Started", "Updated"].map((t) => h("th", { scope: "col" }, t))),
      ),
      body,
    ),
    h("nav", { class: "pager", "aria-label": "Pages of runs" }, newer, where, older),
  );

  let nextCursor = null;
  async function load() {
    const cursor = cursors[cursors.length - 1];
    try {
      const page = await get(withQuery("/api/runs", { status, workflow, outcome, where: search, limit, cursor }));
      if (stopped) return;
      problem.replaceChildren();
      nextCursor = page.next_cursor;
      fill(
        body,
        page.runs.length
          ? page.runs.map((run) =>
              h(
                "tr",
                { "data-run": run.run_id },
                h("td", {}, h("a", { href: `#/runs/${enc(run.run_id)}`, title: run.run_id }, h("code", {}, shortId(run.run_id)))),
                h("td", {}, run.workflow, " ", h("span", { class: "muted version" }, `v${run.version}`)),
                h("td", {}, statusBadge(run.status), outcomeBadge(run), run.parked ? " parked" : "", waitingMark(run.waiting_for)),
                h("td", { class: "num" }, run.superstep),
                h("td", {}, when(run.created_at)),
                h("td", {}, when(run.updated_at)),
              ),
            )
          : h("tr", {}, h("td", { colspan: 6, class: "muted" }, status || workflow || outcome || search ? "No run matches." : "No runs yet. ", status || workflow || outcome || search ? "" : h("a", { href: "#/start" }, "Start one."))),
      );
      newer.disabled = cursors.length < 2;
      older.disabled = !nextCursor;
      where.textContent = `page ${cursors.length}`;
    } catch (error) {
      if (!stopped) fill(problem, h("p", { class: "error" }, `Could not list runs: ${error.message}`));
    }
  }

  newer.addEventListener("click", () => {
    cursors.pop();
    load();
  });
  older.addEventListener("click", () => {
    if (nextCursor) cursors.push(nextCursor);
    load();
  });

  get("/api/workflows")
    .then(({ workflows }) => {
      for (const wf of workflows) {
        if (wf.name !== workflow) workflowSelect.append(h("option", { value: wf.name }, wf.name));
      }
    })
    .catch(() => {});

  load();
  const timer = setInterval(() => {
    if (!document.hidden) load();
  }, REFRESH_MS);
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}
