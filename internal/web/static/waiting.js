// The page's title counts the signed-in person's Sessions that wait on
// them, "(2) Sessions · kndl", so a tab in the background says so: their
// own Sessions that are awake with Claude asking a question, or done with
// its Turn and waiting for the next prompt. The Sessions list feeds it its
// own WebSocket's messages (take); the Session view opens one (follow).
// A question Claude comes to ask on one of them also raises a browser
// notification, if the person turned those on (the Account page asks the
// browser on a click).
import { live } from "./app.js";
import * as paths from "./paths.js";

const me = document.body.dataset.me;
const base = document.title;
const waiting = new Set();
const asking = new Set(); // those with a question waiting, as last seen

function waitsOnMe(s) {
  return s.creator_id === me && s.state === "active" && s.activity !== "turn";
}

// take reads one message of the Sessions list's WebSocket.
export function take(msg) {
  if (msg.type === "list") waiting.clear();
  for (const id of msg.gone || []) {
    waiting.delete(id);
    asking.delete(id);
  }
  for (const s of msg.sessions || []) {
    if (waitsOnMe(s)) waiting.add(s.id);
    else waiting.delete(s.id);
    const asks = s.creator_id === me && s.state === "active" && s.activity === "question";
    // A question already waiting when the page opened was seen there.
    if (asks && !asking.has(s.id) && msg.type !== "list") notify(s);
    if (asks) asking.add(s.id);
    else asking.delete(s.id);
  }
  document.title = waiting.size ? `(${waiting.size}) ${base}` : base;
}

// notify raises the browser's notification of a question on s, unless the
// person is looking at s itself.
function notify(s) {
  if (!("Notification" in window) || Notification.permission !== "granted") return;
  const here = location.pathname === `/sessions/${encodeURIComponent(s.id)}`;
  if (here && document.visibilityState === "visible") return;
  const n = new Notification(`Claude asks you something: ${s.title || "a Session"}`, {
    body: "Answer it in the Session's view.",
    tag: `question-${s.id}`,
  });
  n.onclick = () => {
    window.focus();
    location.assign(`/sessions/${encodeURIComponent(s.id)}`);
  };
}

// follow keeps the title counting on a page without the list's WebSocket.
export function follow() {
  live(() => paths.sessionsLive, { message: take });
}
