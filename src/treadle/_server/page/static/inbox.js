// The inbox: every pending request across runs, each with its answer form.
// Refreshed every three seconds; cards already shown are left as they are.

import { get } from "./api.js";
import { fill, h } from "./dom.js";
import { syncCards } from "./requests.js";

const REFRESH_MS = 3000;

export function inboxView(main) {
  const list = h("div", { class: "cards" });
  const empty = h("p", { class: "muted", hidden: true }, "Nothing is waiting for an answer.");
  const problem = h("div", { role: "alert" });
  const cards = new Map();
  let stopped = false;
  fill(main, h("h1", {}, "Inbox"), h("p", { class: "muted" }, "Requests waiting for an answer, across all runs."), problem, empty, list);

  async function load() {
    try {
      const { requests } = await get("/api/requests");
      if (stopped) return;
      problem.replaceChildren();
      syncCards(list, requests, cards, {});
      empty.hidden = cards.size > 0;
    } catch (error) {
      if (!stopped) fill(problem, h("p", { class: "error" }, `Could not list requests: ${error.message}`));
    }
  }
  load();
  const timer = setInterval(() => {
    if (!document.hidden) load();
  }, REFRESH_MS);
  return () => {
    stopped = true;
    clearInterval(timer);
  };
}
