// The page's title counts the signed-in person's Sessions that wait on
// them, "(2) Sessions · kndl", so a tab in the background says so: their
// own Sessions that are awake with Claude asking a question, or done with
// its Turn and waiting for the next prompt. The Sessions list feeds it its
// own WebSocket's messages (take); the Session view opens one (follow).
import { live } from "./app.js";
import * as paths from "./paths.js";

const me = document.body.dataset.me;
const base = document.title;
const waiting = new Set();

function waitsOnMe(s) {
  return s.creator_id === me && s.state === "active" && s.activity !== "turn";
}

// take reads one message of the Sessions list's WebSocket.
export function take(msg) {
  if (msg.type === "list") waiting.clear();
  for (const id of msg.gone || []) waiting.delete(id);
  for (const s of msg.sessions || []) {
    if (waitsOnMe(s)) waiting.add(s.id);
    else waiting.delete(s.id);
  }
  document.title = waiting.size ? `(${waiting.size}) ${base}` : base;
}

// follow keeps the title counting on a page without the list's WebSocket.
export function follow() {
  live(() => paths.sessionsLive, { message: take });
}
