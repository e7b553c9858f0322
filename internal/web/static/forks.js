// A Session's forks on its view: the Session it was forked from, its own
// forks, and the Creator's Fork button, which asks for the fork's first
// prompt (none leaves it asleep) and opens the fork.
import { api, el, on, showError } from "./app.js";
import * as paths from "./paths.js";

function link(id) {
  const a = el("a", "", id.slice(0, 8));
  a.href = `/sessions/${encodeURIComponent(id)}`;
  return a;
}

async function load(id) {
  const f = await api("GET", paths.forks(id));
  const from = document.getElementById("forked-from");
  from.hidden = !f.from;
  if (f.from) from.replaceChildren("Forked from ", link(f.from.parent_id), ` at the end of its Turn ${f.from.turn}.`);
  document.getElementById("forks").replaceChildren(...f.forks.map((k) => {
    const li = el("li");
    li.append(link(k.session_id), ` from the end of Turn ${k.turn}`);
    return li;
  }));
  document.getElementById("forks-title").hidden = f.forks.length === 0;
  document.getElementById("forks-box").hidden = !f.from && f.forks.length === 0;
}

export function mount(id, isCreator) {
  load(id).catch(() => {}); // a view without them is still the Session's
  if (!isCreator) return;
  on("fork", async (b) => {
    const prompt = window.prompt("Fork this Session: a new Session from a copy of it as it is asleep. Its first prompt (leave empty to keep it asleep):", "");
    if (prompt === null) return;
    const error = document.getElementById("settings-error");
    showError(error, null);
    b.disabled = true;
    try {
      const f = await api("POST", paths.fork(id), prompt.trim() ? { prompt } : {});
      location.href = `/sessions/${encodeURIComponent(f.session_id)}`;
    } catch (err) {
      showError(error, err);
    } finally {
      b.disabled = false;
    }
  });
}
