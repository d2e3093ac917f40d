// A pending request as a card: what it asks, and a form generated from its
// answer's JSON schema. Sending POSTs {"answer": ...} with the token header;
// the server validates strictly: a 422 puts each field's error next to the
// field and stores nothing, a 409 means someone answered first.

import { ApiError, enc, post } from "./api.js";
import { fill, h, jsonBlock, shortId, when } from "./dom.js";
import { schemaForm } from "./schema_form.js";

/** A card for `request`; `onAnswered(run)` is called after the server takes the answer. */
export function requestCard(request, { onAnswered, showRun = true } = {}) {
  const key = `${request.run_id}/${request.request_id}`;
  const formId = `answer-${request.request_id.replace(/[^A-Za-z0-9_-]/g, "_")}`;
  const form = schemaForm(request.answer_schema || {}, {
    legend: `Answer (${request.response_type || "value"})`,
    idPrefix: formId,
  });
  const message = h("div", { class: "form-message", role: "alert" });
  const submit = h("button", { type: "submit", class: "primary" }, "Send answer");
  const element = h(
    "form",
    { class: "card request", "data-request": request.request_id, "data-run": request.run_id, "aria-label": `Request ${request.request_id}`, novalidate: true },
    h(
      "header",
      {},
      h("h3", {}, h("code", {}, request.executor_id || "?"), " asks for ", h("code", {}, request.response_type || "an answer")),
      h(
        "p",
        { class: "muted" },
        showRun ? ["run ", h("a", { href: `#/runs/${enc(request.run_id)}`, title: request.run_id }, shortId(request.run_id)), " · "] : null,
        "request ",
        h("code", {}, request.request_id),
        request.deadline_at ? ` · answer by ${when(request.deadline_at)}` : "",
      ),
    ),
    h("h4", {}, "What it asks"),
    jsonBlock(request.payload, "request payload"),
    form.element,
    h("div", { class: "actions" }, submit),
    message,
  );

  element.addEventListener("submit", async (submitEvent) => {
    submitEvent.preventDefault();
    form.clearErrors();
    message.replaceChildren();
    const got = form.read();
    if (!got.ok) {
      const left = form.showErrors(got.errors);
      fill(message, h("p", { class: "error" }, "Fix the fields marked above."), unplacedList(left));
      return;
    }
    submit.disabled = true;
    try {
      const answer = await post(`/api/runs/${enc(request.run_id)}/requests/${enc(request.request_id)}`, { answer: got.value });
      settle(element, h("p", { class: "ok" }, "Answered. The run goes on."));
      answered();
      if (onAnswered) onAnswered(answer && answer.run);
    } catch (error) {
      submit.disabled = false;
      if (!(error instanceof ApiError)) throw error;
      if (error.status === 409) {
        settle(element, h("p", { class: "error" }, `Already answered. ${error.message}`));
        answered();
      } else {
        const left = form.showErrors(error.fields);
        const fits = error.status === 422 && error.fields.length;
        fill(
          message,
          h("p", { class: "error" }, fits ? "The answer does not fit its type (see the fields marked); nothing was stored and the run still waits." : error.message),
          unplacedList(left),
        );
      }
    }
  });
  function settle(card, note) {
    card.classList.add("answered");
    card.dataset.settledAt = String(Date.now());
    card.querySelectorAll("input, select, textarea, button").forEach((el) => (el.disabled = true));
    fill(message, note);
  }
  return { key, element };
}

/** Tells the page a request was answered, so what counts them (the inbox badge) counts again. */
function answered() {
  document.dispatchEvent(new CustomEvent("treadle:answered"));
}

const KEEP_SETTLED_MS = 5000;

function unplacedList(items) {
  if (!items || !items.length) return null;
  return h(
    "ul",
    { class: "error" },
    items.map((item) => h("li", {}, `${Array.isArray(item.loc) ? item.loc.join(".") : item.loc || "(answer)"}: ${item.message}`)),
  );
}

/**
 * Keeps a container's cards in step with a list of pending requests: new ones
 * added, gone ones removed, the rest untouched (so nobody's typing is lost).
 */
export function syncCards(container, requests, cards, options, dropSettled = false) {
  const live = new Set();
  for (const request of requests) {
    const key = `${request.run_id}/${request.request_id}`;
    live.add(key);
    if (!cards.has(key)) {
      const card = requestCard(request, options);
      cards.set(key, card);
      container.append(card.element);
    }
  }
  for (const [key, card] of cards) {
    const settled = Number(card.element.dataset.settledAt || 0);
    // An answered card stays a few seconds, so its "Answered" can be read.
    if (!live.has(key) && (!settled || dropSettled || Date.now() - settled > KEEP_SETTLED_MS)) {
      card.element.remove();
      cards.delete(key);
    }
  }
}
