// The Sessions list: the new-Session form, the filter, and each Session's
// row kept live over the list's WebSocket (paths.sessionsLive): its state,
// what it is doing, Keep awake and its pull request change without a
// reload, a Session started elsewhere appears, and one the person may no
// longer see, or that the filter no longer keeps, goes. The filter is the
// page's query, which the WebSocket takes as it is, so a filtered list is
// a link to share.
import { api, costText, live, pullLine, pullState, showActivity, showError, showState, showTime, spentText, submit } from "./app.js";
import { modelPicker } from "./models.js";
import * as paths from "./paths.js";
import { follow, take } from "./waiting.js";

const newSession = document.getElementById("new-session");
const newSessionError = document.getElementById("new-session-error");
modelPicker(newSession).catch((err) => showError(newSessionError, err));
submit(newSession, newSessionError, async (f) => {
  const body = { repo: f.repo.trim(), prompt: f.prompt, model: f.model, effort: f.effort };
  // More than one attempt is an attempt set; the Hub refuses more than 8.
  if (Number(f.attempts) !== 1) {
    const set = await api("POST", paths.attempts, { ...body, attempts: Number(f.attempts) });
    location.assign("/attempts/" + encodeURIComponent(set.id));
    return;
  }
  const s = await api("POST", paths.sessions, body);
  location.assign("/sessions/" + encodeURIComponent(s.id));
});

const repos = document.getElementById("repos");

// The filter goes into the page's address, with only the fields set, and
// a choice applies at once; the search, on Enter.
const filters = document.getElementById("filters");
filters.addEventListener("submit", (e) => {
  e.preventDefault();
  const q = new URLSearchParams();
  for (const [k, v] of new FormData(filters)) if (v.trim()) q.set(k, v.trim());
  location.assign(q.size ? "/?" + q : "/");
});
for (const input of filters.querySelectorAll("select, input[type=checkbox]")) {
  input.addEventListener("change", () => filters.requestSubmit());
}
// A filtered list is not all of the person's Sessions: the title counts
// the ones waiting on them over a WebSocket of its own. A filter the Hub
// refused (the page says why) has no live list.
const refused = !document.getElementById("filter-error").hidden;
const filtered = refused || filters.hasAttribute("data-filtered");
if (filtered) follow();

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
  const pr = li.querySelector(".pull");
  pr.hidden = !s.pull;
  if (s.pull) {
    pr.href = /^https?:\/\//.test(s.pull.url) ? s.pull.url : "";
    pr.dataset.state = pullState(s.pull);
    pr.dataset.checks = s.pull.checks || "";
    pr.textContent = `#${s.pull.number} ${pullLine(s.pull)}`;
  }
  const spent = li.querySelector(".spent");
  spent.hidden = !s.spent;
  if (s.spent) {
    spent.textContent = costText(s.spent);
    spent.title = spentText(s.spent);
  }
}

function drop(id) {
  const li = rowOf(id);
  if (!li) return;
  const sec = li.closest("section");
  li.remove();
  if (!sec.querySelector("li[data-id]")) sec.remove();
}

if (!refused) live(() => paths.sessionsLive + location.search, {
  open: () => repos.classList.remove("offline"),
  close: () => repos.classList.add("offline"),
  message: (msg) => {
    if (!filtered) take(msg);
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
