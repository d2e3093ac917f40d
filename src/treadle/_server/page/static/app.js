// The page's router: #/runs, #/runs/<id>, #/inbox, #/start, #/schedules[/<id>], #/webhooks. Each view takes
// the <main> element and returns a function that stops its timers and
// streams when another view replaces it.

import { get } from "./api.js";
import { fill, h } from "./dom.js";
import { inboxView } from "./inbox.js";
import { runView } from "./run.js";
import { runsView } from "./runs.js";
import { scheduleView, schedulesView } from "./schedules.js";
import { startView } from "./start.js";
import { webhooksView } from "./webhooks.js";

const main = document.getElementById("main");
let leave = () => {};

function route() {
  const hash = location.hash || "#/runs";
  if (!hash.startsWith("#/")) return; // an in-page link (e.g. "skip to content"), not a view
  const [path, queryText] = hash.slice(1).split("?");
  const query = new URLSearchParams(queryText || "");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  leave();
  leave = () => {};
  let section = parts[0] || "runs";
  try {
    if (section === "runs" && parts.length > 1) {
      leave = runView(main, parts.slice(1).join("/"));
      document.title = `Run ${parts[1]} · treadle`;
    } else if (section === "runs") {
      leave = runsView(main, query);
      document.title = "Runs · treadle";
    } else if (section === "inbox") {
      leave = inboxView(main, query);
      document.title = "Inbox · treadle";
    } else if (section === "start") {
      leave = startView(main, query);
      document.title = "Start a run · treadle";
    } else if (section === "schedules" && parts.length > 1) {
      leave = scheduleView(main, parts.slice(1).join("/"));
      document.title = `Schedule ${parts[1]} · treadle`;
    } else if (section === "schedules") {
      leave = schedulesView(main);
      document.title = "Schedules · treadle";
    } else if (section === "webhooks") {
      leave = webhooksView(main);
      document.title = "Dead letters · treadle";
    } else {
      section = "";
      fill(main, h("h1", {}, "Not found"), h("p", {}, h("a", { href: "#/runs" }, "All runs")));
    }
  } catch (error) {
    fill(main, h("h1", {}, "Something went wrong"), h("pre", { class: "traceback" }, String(error && error.stack ? error.stack : error)));
  }
  countRequests();
  for (const link of document.querySelectorAll("[data-nav]")) {
    if (link.dataset.nav === section) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
}

// The inbox count in the header, kept fresh while the page is open.
async function countRequests() {
  if (document.hidden) return;
  const badge = document.getElementById("inbox-count");
  try {
    const { requests } = await get("/api/requests");
    badge.textContent = requests.length ? String(requests.length) : "";
  } catch {
    badge.textContent = "";
  }
}

window.addEventListener("hashchange", route);
document.addEventListener("treadle:answered", countRequests); // not only on the timer: at once
route();
setInterval(countRequests, 4000);
