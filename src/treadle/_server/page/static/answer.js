// An answer link's page (/answer/<token>): the question its request asks and
// the page's answer form (requests.js), sent back to the same address. The
// link is the credential: no token is needed, and whoever is signed in here
// must be the person the link was made for (the server says so otherwise).

import { ApiError, get } from "./api.js";
import { fill, h, when } from "./dom.js";
import { requestCard } from "./requests.js";

const main = document.getElementById("main");
const path = location.pathname;

async function show() {
  let found;
  try {
    found = await get(path);
  } catch (error) {
    const refused = error instanceof ApiError && error.type === "LinkRefusedError";
    fill(main, h("h1", {}, refused ? "This link cannot be used" : "Something went wrong"), h("p", { class: "error", role: "alert" }, error.message));
    return;
  }
  const { link, request } = found;
  const card = requestCard(request, { answerPath: path, showRun: false });
  fill(
    main,
    h("h1", {}, "Answer a request"),
    h("p", { class: "muted" }, "You answer as ", h("strong", {}, link.principal), `, once; this link works until ${when(link.expires_at)}.`),
    card.element,
  );
}

show();
