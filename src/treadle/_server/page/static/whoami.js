// Who is looking at the page, in its header: the name the record will show for
// what they do here, their role, and a way to sign out when people sign in
// (GET /api/me says both). A person never types who they are.

import { api } from "./api.js";

async function showWho() {
  const slot = document.getElementById("who");
  if (!slot) return;
  let me;
  try {
    me = await api("GET", "/api/me");
  } catch {
    return; // an answer link's page: the link names its holder
  }
  const { actor, sign_in: signIn } = me;
  const name = document.createElement("span");
  name.className = "who-name";
  name.textContent = actor.label;
  const role = document.createElement("span");
  role.className = "who-role muted";
  role.textContent = ` (${actor.role})`;
  slot.replaceChildren(name, role);
  if (signIn) {
    const out = document.createElement("button");
    out.type = "button";
    out.className = "who-signout";
    out.textContent = "Sign out";
    out.addEventListener("click", async () => {
      // The provider signs out too, else its live session signs the next visit back in.
      const done = await api("POST", "/auth/logout");
      window.location.assign((done && done.end_session) || "/");
    });
    slot.append(" ", out);
  }
}

showWho();
