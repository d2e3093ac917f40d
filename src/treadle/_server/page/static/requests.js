// A pending request as a card: what it asks, and a form generated from its
// answer's JSON schema. Nothing is sent on one click: "Send answer" shows what
// would be sent (each decision named) and asks to confirm; a decision not
// taken or a required text left empty is refused before that. Confirming
// POSTs {"answer": ...}; the server validates strictly: a 422 puts each
// field's error next to the field and stores nothing, a 409 means someone
// answered first, a 403 says who may answer.

import { ApiError, enc, post } from "./api.js";
import { fill, h, jsonBlock, shortId, when } from "./dom.js";
import { schemaForm } from "./schema_form.js";

/**
 * A card for `request`; `onAnswered(run)` is called after the server takes the answer.
 * `answerPath`: where the answer goes (an answer link's own address), else the API's route.
 */
export function requestCard(request, { onAnswered, showRun = true, answerPath } = {}) {
  const key = `${request.run_id}/${request.request_id}`;
  const formId = `answer-${request.request_id.replace(/[^A-Za-z0-9_-]/g, "_")}`;
  const form = schemaForm(request.answer_schema || {}, {
    legend: `Answer (${request.response_type || "value"})`,
    idPrefix: formId,
  });
  const message = h("div", { class: "form-message", role: "alert" });
  const submit = h("button", { type: "submit", class: "primary" }, "Send answer");
  const confirm = h("button", { type: "button", class: "primary" }, "Confirm and send");
  const back = h("button", { type: "button" }, "Back");
  const confirmation = h("div", { class: "confirmation", role: "group", "aria-label": "Confirm the answer", hidden: true });
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
    confirmation,
    message,
  );
  let pending = null; // the answer shown for confirmation

  function unconfirm() {
    pending = null;
    confirmation.hidden = true;
    confirmation.replaceChildren();
    submit.hidden = false;
  }
  back.addEventListener("click", unconfirm);
  form.element.addEventListener("input", unconfirm); // a change after "Send answer" asks again
  form.element.addEventListener("click", (clicked) => {
    if (clicked.target instanceof HTMLElement && clicked.target.closest("button.choice")) unconfirm();
  });
  confirm.addEventListener("click", () => {
    if (pending !== null) send(pending.value);
  });

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
    pending = got;
    const decided = form.decisions();
    fill(
      confirmation,
      h("p", {}, decided.length ? ["Send this answer? You decide ", h("strong", {}, decided.join(", ")), "."] : "Send this answer?"),
      jsonBlock(got.value, "the answer to send"),
      h("div", { class: "actions" }, confirm, back),
    );
    confirmation.hidden = false;
    submit.hidden = true;
    confirm.focus();
  });

  async function send(value) {
    confirm.disabled = true;
    back.disabled = true;
    try {
      const path = answerPath || `/api/runs/${enc(request.run_id)}/requests/${enc(request.request_id)}`;
      const answer = await post(path, { answer: value });
      unconfirm();
      settle(element, h("p", { class: "ok" }, "Answered. The run goes on."));
      answered();
      if (onAnswered) onAnswered(answer && answer.run);
    } catch (error) {
      confirm.disabled = false;
      back.disabled = false;
      unconfirm();
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
  }
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
