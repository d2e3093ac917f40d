// Webhooks' dead letters (an admin's view): the messages their endpoint did
// not take within its attempts, each with a Resend button, and Resend all.
// Re-sent messages keep their webhook-id, so a receiver that took one after
// all drops the copy. The same as `treadle webhooks dead` and `resend`.

import { ApiError, enc, get, post } from "./api.js";
import { fill, h, shortId, when } from "./dom.js";

export function webhooksView(main) {
  const body = h("tbody");
  const empty = h("p", { class: "muted", hidden: true }, "No dead letters: every message reached its endpoint or is still being tried.");
  const problem = h("div", { role: "alert" });
  const all = h("button", { type: "button", hidden: true }, "Resend all");
  let stopped = false;

  async function resend(payload, button) {
    button.disabled = true;
    try {
      const { resent } = await post("/api/webhooks/dead/resend", payload);
      fill(problem, h("p", { class: "ok" }, `${resent} dead letter${resent === 1 ? "" : "s"} queued to send again.`));
    } catch (error) {
      button.disabled = false;
      fill(problem, h("p", { class: "error" }, `Could not resend: ${error.message}`));
    }
    load();
  }
  all.addEventListener("click", () => resend({ all: true }, all));

  async function load() {
    let dead;
    try {
      ({ dead } = await get("/api/webhooks/dead"));
    } catch (error) {
      if (stopped) return;
      const forbidden = error instanceof ApiError && error.status === 403;
      fill(problem, h("p", { class: "error" }, forbidden ? `Only an admin sees dead letters: ${error.message}` : `Could not list dead letters: ${error.message}`));
      return;
    }
    if (stopped) return;
    body.replaceChildren(
      ...dead.map((m) => {
        const button = h("button", { type: "button", "data-message": String(m.message_id) }, "Resend");
        button.addEventListener("click", () => resend({ message_ids: [m.message_id] }, button));
        return h(
          "tr",
          { "data-message": String(m.message_id) },
          h("td", {}, String(m.message_id)),
          h("td", {}, h("code", {}, m.type)),
          h("td", {}, h("a", { href: `#/runs/${enc(m.run_id)}`, title: m.run_id }, shortId(m.run_id))),
          h("td", {}, h("code", {}, m.endpoint_id)),
          h("td", {}, String(m.attempts)),
          h("td", {}, m.last_error || ""),
          h("td", {}, when(m.due_at)),
          h("td", {}, button),
        );
      }),
    );
    empty.hidden = dead.length > 0;
    all.hidden = dead.length === 0;
  }

  fill(
    main,
    h("h1", {}, "Webhooks: dead letters"),
    h("p", { class: "muted" }, "Messages their endpoint did not take within its attempts. Resending keeps each message's webhook-id."),
    problem,
    empty,
    h(
      "table",
      { "aria-label": "Dead letters" },
      h("thead", {}, h("tr", {}, ["Id", "Type", "Run", "Endpoint", "Attempts", "Last error", "Last tried", ""].map((c) => h("th", { scope: "col" }, c)))),
      body,
    ),
    h("div", { class: "actions" }, all),
  );
  load();
  return () => {
    stopped = true;
  };
}
