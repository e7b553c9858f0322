// Shared by every app page. Markup holds no code: a control names its
// action in data-action, and one delegated listener looks the action up in
// a registry (never on window). Every value is put in the page as text.

const actions = new Map();

// on registers what a click on an element with data-action=name does.
export function on(name, fn) {
  actions.set(name, fn);
}

document.addEventListener("click", (e) => {
  const el = e.target.closest("[data-action]");
  if (!el || !actions.has(el.dataset.action)) return;
  e.preventDefault();
  actions.get(el.dataset.action)(el, e);
});

// api calls the Hub's API with the sign-in cookie and returns the decoded
// answer; it throws an Error with the Hub's message. A Blob (a File) body
// goes as it is, streamed; anything else as JSON.
export async function api(method, path, body) {
  const opts = { method, credentials: "same-origin", headers: {} };
  if (body instanceof Blob) {
    opts.headers["Content-Type"] = "application/octet-stream";
    opts.body = body;
  } else if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const resp = await fetch(path, opts);
  if (!resp.ok) {
    const err = await resp.json().catch(() => ({}));
    if (resp.status === 403 && resp.headers.has("X-Kndl-Sign-In-Again")) {
      // A privileged act needs a recent sign-in: sign in again, and come
      // back to this page.
      location.assign("/signin?next=" + encodeURIComponent(location.pathname + location.search));
    }
    throw new Error(err.message || `${resp.status} ${resp.statusText}`);
  }
  if (resp.status === 204) return null;
  return resp.json();
}

// showError puts a message in an error element, or hides it.
export function showError(el, err) {
  if (!el) return;
  el.textContent = err ? String(err.message || err) : "";
  el.hidden = !err;
}

// el makes an element with a class and text.
export function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// form reads a form's fields by name.
export function fields(form) {
  return Object.fromEntries(new FormData(form).entries());
}

// submit runs fn on a form's submit, showing its error in errEl.
export function submit(form, errEl, fn) {
  if (!form) return;
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const button = form.querySelector("button[type=submit]");
    if (button) button.disabled = true;
    showError(errEl, null);
    try {
      await fn(fields(form));
    } catch (err) {
      showError(errEl, err);
    } finally {
      if (button) button.disabled = false;
    }
  });
}

// live keeps a WebSocket to the Hub at path open, reconnecting with backoff;
// path is asked again at each connect. on.message takes each decoded
// message, on.open and on.close say the socket came and went. It returns
// send, which drops a message while the socket is down.
export function live(path, on) {
  let socket = null;
  let backoff = 500;
  const connect = () => {
    socket = new WebSocket(`${location.protocol === "https:" ? "wss" : "ws"}://${location.host}${path()}`);
    socket.addEventListener("open", () => {
      backoff = 500;
      if (on.open) on.open();
    });
    socket.addEventListener("message", (m) => on.message(JSON.parse(m.data)));
    socket.addEventListener("close", () => {
      if (on.close) on.close();
      // A random half off: a Hub's pages do not all dial in the same
      // instant once it is back (a standby taking over thousands).
      setTimeout(connect, backoff / 2 + Math.random() * (backoff / 2));
      backoff = Math.min(backoff * 2, 10000);
    });
  };
  connect();
  return (msg) => {
    if (socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(msg));
  };
}

// showState puts a Session's state in its badge, with why it is so as the
// badge's tooltip.
export function showState(badge, s) {
  // place: in its Creator's line for an awake place (HUB_MEMBER_MAX_AWAKE).
  badge.textContent = s.place ? `${s.state}, in line: place ${s.place}` : s.state;
  badge.className = "state state-" + s.state;
  badge.title = s.state_detail || "";
}

// What an Active Session is doing, as its badge says it.
const activities = { turn: "a Turn runs", question: "waits on a question" };

// showActivity shows what an Active Session is doing, or hides its badge.
export function showActivity(badge, s) {
  const a = (s.state === "active" && s.activity) || "";
  badge.textContent = activities[a] || "";
  badge.className = "activity activity-" + a;
  badge.hidden = !activities[a];
}

// pullState is a pull request's state as a person reads it: merged, draft,
// open or closed.
export function pullState(p) {
  return p.merged ? "merged" : p.draft && p.state === "open" ? "draft" : p.state;
}

// pullLine is a pull request's state with its checks and review decision,
// as the Hub's Pull.Line puts it: "open · checks failing · approved".
export function pullLine(p) {
  const parts = [pullState(p)];
  if (p.checks) parts.push("checks " + p.checks);
  if (p.review) parts.push(p.review.replaceAll("_", " "));
  return parts.join(" · ");
}

// --- Times ---

// Relative times ("3 min ago") are kept fresh this often.
const refreshEvery = 30 * 1000;

// ago says how long before now t was, as people say it; a time ahead of
// this browser's clock, by a little skew, is "just now" too.
export function ago(t, now = Date.now()) {
  const s = (now - t) / 1000;
  if (s < 45) return "just now";
  let n = s / 60;
  for (const [unit, size] of [["min", 60], ["h", 24], ["d", Infinity]]) {
    if (Math.round(n) < size) return `${Math.round(n)} ${unit} ago`;
    n /= size;
  }
}

// showTime writes a time into el as "3 min ago", the exact time on hover,
// and keeps it fresh; t is what the API sends (RFC 3339), or a Date.
export function showTime(el, t) {
  const d = new Date(t);
  if (isNaN(d)) {
    el.textContent = "";
    return;
  }
  el.dataset.at = d.toISOString();
  el.title = d.toLocaleString(undefined, { dateStyle: "full", timeStyle: "long" });
  el.textContent = ago(d);
}

// The pages' server-rendered times (<time> elements) are in the Hub's
// format, 2006-01-02 15:04 UTC (hub.when): each is shown as showTime does.
for (const t of document.querySelectorAll("time:not([data-at])")) {
  const m = /^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}) UTC$/.exec(t.textContent.trim());
  if (m) showTime(t, `${m[1]}T${m[2]}:00Z`);
}

setInterval(() => {
  for (const t of document.querySelectorAll("[data-at]")) t.textContent = ago(new Date(t.dataset.at));
}, refreshEvery);

// --- Keys ---

// "/" focuses the page's prompt (the textarea marked data-key-focus), as
// in chat and search pages, unless a field has the keys already; Esc in
// it leaves it, so "/" and the page's keys work again. Esc elsewhere (the
// terminal's own field) is left alone.
document.addEventListener("keydown", (e) => {
  const prompt = document.querySelector("[data-key-focus]");
  if (!prompt || e.ctrlKey || e.metaKey || e.altKey) return;
  if (e.key === "Escape" && e.target === prompt) {
    prompt.blur();
    return;
  }
  const typing = e.target.closest?.("input, textarea, select, [contenteditable]");
  if (e.key === "/" && !typing && !prompt.closest("[hidden]")) {
    e.preventDefault();
    prompt.focus();
  }
});

// spentText is what replies spent (an api.Spent) in a line, as the Hub's
// Spent.Summary puts it: each kind of tokens, then the cost, marked an
// estimate.
export function spentText(s) {
  const n = (v) => (v || 0).toLocaleString("en-US");
  return `${n(s.input_tokens)} input · ${n(s.output_tokens)} output · ${n(s.cache_read_input_tokens)} cache read · ` +
    `${n(s.cache_creation_input_tokens)} cache write tokens · ${costText(s)}`;
}

// costText is the estimated cost alone, as the Hub's Spent.Estimate puts
// it: the Sessions list's rows show it.
export function costText(s) {
  const usd = s.estimated_usd || 0;
  let cost = "$" + usd.toFixed(usd > 0 && usd < 0.01 ? 4 : 2) + " estimated";
  if (s.unpriced && s.unpriced.length) cost += " (no price for " + s.unpriced.join(", ") + ")";
  return cost;
}

// spentByModel is a title naming what each model spent.
export function spentByModel(s) {
  return (s.models || []).map((m) => `${m.model}: ${spentText(m)}`).join("\n");
}
