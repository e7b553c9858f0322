// The Sessions list: the new-Session form, and each Session's row kept
// live over the list's WebSocket (paths.sessionsLive): its state, what
// it is doing and Keep awake change without a reload, a Session started
// elsewhere appears, and one the person may no longer see goes.
import { api, live, showActivity, showState, showTime, submit } from "./app.js";
import * as paths from "./paths.js";
import { take } from "./waiting.js";

submit(document.getElementById("new-session"), document.getElementById("new-session-error"), async (f) => {
  const s = await api("POST", paths.sessions, { repo: f.repo.trim(), prompt: f.prompt, model: f.model.trim(), effort: f.effort });
  location.assign("/sessions/" + encodeURIComponent(s.id));
});

const repos = document.getElementById("repos");

function rowOf(id) {
  return [...repos.querySelectorAll("li[data-id]")].find((li) => li.dataset.id === id);
}

// section is the Repo's card, made from the page's template if it has
// none yet.
function section(url, id) {
  let sec = [...repos.querySelectorAll("section[data-repo]")].find((s) => s.dataset.repo === url);
  if (!sec) {
    sec = document.getElementById("repo-template").content.firstElementChild.cloneNode(true);
    sec.dataset.repo = url;
    sec.querySelector("a.repo-page").href = "/repos/" + encodeURIComponent(id);
    sec.querySelector(".name").textContent = url.replace(/\/+$/, "").split("/").pop().replace(/\.git$/, "");
    sec.querySelector(".url").textContent = url;
    repos.prepend(sec);
  }
  return sec;
}

// show draws a Session's row, making it (newest first) if it is new.
function show(s, names) {
  let li = rowOf(s.id);
  if (!li) {
    li = document.getElementById("row-template").content.firstElementChild.cloneNode(true);
    li.dataset.id = s.id;
    li.querySelector("a.title").href = "/sessions/" + encodeURIComponent(s.id);
    section(s.repo_url, s.repo_id).querySelector("ul.sessions").prepend(li);
  }
  li.querySelector("a.title").textContent = s.title;
  showState(li.querySelector(".state"), s);
  showActivity(li.querySelector(".activity"), s);
  li.querySelector(".keep-awake").hidden = !s.keep_awake;
  if (names[s.creator_id]) li.querySelector(".creator").textContent = names[s.creator_id];
  showTime(li.querySelector(".updated"), s.updated_at);
}

function drop(id) {
  const li = rowOf(id);
  if (!li) return;
  const sec = li.closest("section");
  li.remove();
  if (!sec.querySelector("li[data-id]")) sec.remove();
}

live(() => paths.sessionsLive, {
  open: () => repos.classList.remove("offline"),
  close: () => repos.classList.add("offline"),
  message: (msg) => {
    take(msg);
    const sessions = msg.sessions || [];
    if (msg.type === "list") {
      const listed = new Set(sessions.map((s) => s.id));
      for (const li of repos.querySelectorAll("li[data-id]")) if (!listed.has(li.dataset.id)) drop(li.dataset.id);
    }
    for (const id of msg.gone || []) drop(id);
    // Newest first: the oldest new row goes on top first.
    for (const s of [...sessions].reverse()) show(s, msg.names || {});
    document.getElementById("no-sessions").hidden = !!repos.querySelector("li[data-id]");
  },
});
