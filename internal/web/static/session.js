// The Session view: the transcript as a chat, live over one WebSocket, the
// Creator's prompt box, queue and terminal, and the open ports. Everything a
// Session holds is written with textContent; only Claude's Markdown, which
// the Hub renders with raw HTML left out and every text escaped, is set as
// HTML.
import { api, el, live, on, pullLine, showActivity, showError, showState, showTime, spentByModel, spentText, submit } from "./app.js";
import * as paths from "./paths.js";
import { follow } from "./waiting.js";
import { fileList, picker, promptText } from "./attachments.js";
import { modelPicker } from "./models.js";
import * as changesTab from "./changes.js";
import * as forks from "./forks.js";

const root = document.getElementById("session");
const id = root.dataset.id;
const isCreator = root.dataset.creator === "true";
const canPush = root.dataset.canPush === "true";
// modelChoice fills the Creator's model and effort selects from the Hub's offer.
const modelChoice = isCreator ? modelPicker(document.getElementById("settings-form")) : null;
const transcript = document.getElementById("transcript");
const tools = new Map(); // tool_id -> the tool call's element
const agentCalls = new Map(); // an Agent tool call's tool_id -> its input
const agents = new Map(); // agent id -> { type, parent, state }, in the order they started
const agentParents = new Map(); // agent id -> its Agent tool call, from any of its Events
let lastSeq = 0;
let state = document.getElementById("state").textContent;
let terminal = null; // the terminal module, once its tab is opened
const changes = changesTab.mount(document.getElementById("pane-changes"), id);
forks.mount(id, isCreator);

// --- The transcript ---

function summary(tool, input) {
  if (!input || typeof input !== "object") return "";
  const pick = input.command ?? input.file_path ?? input.description ?? input.pattern ?? input.url ?? input.query ??
    Object.values(input).find((v) => typeof v === "string") ?? "";
  const line = String(pick).split("\n")[0];
  return line.length > 140 ? line.slice(0, 139) + "…" : line;
}

// children is where the Events of a subagent go: under the tool call that
// started it.
function children(call) {
  return call.querySelector(":scope > details > .tool-body > .children");
}

// early holds, by tool call, the Events of its subagent that came before
// the call itself (a subagent_start can: the Runner sends a hook's Events
// after the transcript's next batch, which may be the subagent's own
// file's): they move under the call when it comes.
const early = new Map();

function item(ev, cls) {
  const li = el("li", "ev " + cls);
  li.dataset.seq = ev.seq;
  const call = ev.parent && tools.get(ev.parent);
  if (call) {
    children(call).append(li);
  } else {
    transcript.append(li);
    if (ev.parent) early.set(ev.parent, [...(early.get(ev.parent) || []), li]);
  }
  return li;
}

// sourceName says whose words a prompt auto-fix queued are: a GitHub
// review's author or a check's, never the Creator's.
function sourceName(src) {
  return src.kind === "review" ? `@${src.name}'s review on GitHub` : `the check "${src.name}" on GitHub`;
}

// turnLine writes a Turn's start or end, with when, as showTime does.
function turnLine(li, text, ev) {
  const at = el("time");
  showTime(at, ev.at);
  li.append(text + " · ", at);
}

function addEvent(ev, html, files, spent, source) {
  if (ev.seq <= lastSeq) return;
  lastSeq = ev.seq;
  trackAgent(ev);
  trackTurnText(ev);
  switch (ev.kind) {
    case "prompt": {
      const li = item(ev, "prompt");
      li.append(el("div", "who", source ? "Prompt from " + sourceName(source) : "Prompt"), el("div", "text", promptText(ev.text, files)));
      if (files.length) li.append(fileList(id, files));
      break;
    }
    case "text":
    case "thinking": {
      const li = item(ev, ev.kind);
      const md = el("div", "md");
      md.innerHTML = html; // rendered by the Hub: escaped, no raw HTML
      for (const a of md.querySelectorAll("a[href]")) {
        a.target = "_blank";
        a.rel = "noopener noreferrer";
      }
      li.append(md);
      break;
    }
    case "tool_use": {
      const li = item(ev, "tool");
      const details = el("details");
      const sum = el("summary");
      sum.append(el("span", "tool-name", ev.tool), el("span", "tool-summary", summary(ev.tool, ev.input)));
      const body = el("div", "tool-body");
      body.append(el("pre", "tool-input", JSON.stringify(ev.input ?? {}, null, 2)));
      const path = ev.input && typeof ev.input.file_path === "string" ? ev.input.file_path : "";
      if ((ev.tool === "Write" || ev.tool === "Edit") && path.startsWith("/workspace/")) {
        const a = el("a", "download", "Download " + path.slice("/workspace/".length));
        a.href = paths.file(id, path.slice("/workspace/".length));
        a.setAttribute("download", "");
        body.append(a);
      }
      body.append(el("pre", "tool-output"), el("ol", "children"));
      details.append(sum, body);
      li.append(details);
      tools.set(ev.tool_id, li);
      children(li).append(...(early.get(ev.tool_id) || []));
      early.delete(ev.tool_id);
      break;
    }
    case "tool_result": {
      const li = tools.get(ev.tool_id);
      if (!li) {
        item(ev, "tool-orphan").append(el("pre", "tool-output", ev.text || ""));
        break;
      }
      li.querySelector(":scope > details > .tool-body > .tool-output").textContent = ev.text || "";
      li.classList.add(ev.is_error ? "failed" : "done");
      break;
    }
    case "turn_start":
      turnLine(item(ev, "turn"), "Turn started", ev);
      break;
    case "turn_end": {
      const li = item(ev, "turn " + (ev.reason || "done"));
      turnLine(li, `Turn ${ev.reason === "interrupted" ? "interrupted" : ev.reason === "error" ? "failed" : "ended"}`, ev);
      if (spent) {
        const s = el("span", "spent", " · " + spentText(spent));
        s.title = spentByModel(spent);
        li.append(s);
      }
      changes.turnEnded();
      break;
    }
    case "subagent_start":
      item(ev, "note").textContent = "Subagent started" + (ev.text ? " · " + ev.text : "");
      break;
    case "subagent_stop":
      item(ev, "note").textContent = ev.text || "Its Creator asked it to stop";
      break;
    case "subagent_end":
      item(ev, "note" + (ev.reason ? " " + ev.reason : "")).textContent = "Subagent " + endedAs(ev.reason);
      break;
    case "log": {
      let last = transcript.lastElementChild;
      if (!last || !last.classList.contains("log")) {
        last = item(ev, "log");
        const d = el("details");
        d.append(el("summary", "", "Start log"), el("pre"));
        last.append(d);
      }
      last.querySelector("pre").textContent += ev.text + "\n";
      break;
    }
    case "ready":
      item(ev, "note").textContent = ev.text === "resume" ? "Claude Code resumed" : "Claude Code is ready";
      break;
    case "question":
      addQuestion(ev);
      break;
    case "answer": {
      const card = questions.get(ev.tool_id);
      if (card) answered(card, ev.text);
      else item(ev, "note").textContent = "Answered: " + ev.text;
      break;
    }
    case "error":
      item(ev, "error").textContent = ev.text;
      break;
    default: {
      const li = item(ev, "note");
      li.textContent = ev.text || ev.kind;
      if (ev.blocked) blockedActions(li, ev.blocked);
      if (ev.requested) requested(ev.requested);
    }
  }
  if (nearBottom) window.scrollTo(0, document.body.scrollHeight);
}

// --- A host the allowlist refused ---

// blockedActions offers, on the note of a host the Session's egress
// allowlist refused, Allow to a Member with push and Request to its
// Creator without; the Hub checks both again.
function blockedActions(li, host) {
  const action = canPush ? "allow-host" : isCreator ? "request-host" : "";
  if (!action) return;
  const b = el("button", "quiet " + action, canPush ? "Allow" : "Request");
  b.type = "button";
  b.dataset.action = action;
  b.dataset.host = host;
  b.title = canPush ? `Add ${host} to the Repo's egress allowlist` : `Ask the Repo's Members with push to allow ${host}`;
  li.append(" ", b);
}

// requested replaces the Request buttons of a host asked for already.
function requested(host) {
  for (const b of transcript.querySelectorAll("button.request-host")) {
    if (b.dataset.host === host) b.replaceWith(el("span", "done", "Requested"));
  }
}

// answerBlocked posts a host's Allow or Request and says how it went in
// place of the button.
async function answerBlocked(b, what, done) {
  b.disabled = true;
  const err = b.parentElement.querySelector(".error") || b.parentElement.appendChild(el("span", "error"));
  showError(err, null);
  try {
    const got = await api("POST", paths.egress(id, what), { host: b.dataset.host });
    b.replaceWith(el("span", "done", done(got)));
  } catch (e) {
    b.disabled = false;
    showError(err, e);
  }
}

on("allow-host", (b) => {
  const host = b.dataset.host;
  if (!confirm(`Allow ${host}? It goes on the Repo's egress allowlist: every Session of this Environment may reach ${host}, the awake ones at once.`)) return;
  answerBlocked(b, "allow", (v) => `Allowed in Environment version ${v.version}`);
});
on("request-host", (b) => answerBlocked(b, "request", (got) => `Asked ${got.asked} Member${got.asked === 1 ? "" : "s"} with push`));

// --- Subagents ---

// endedAs is the state a subagent_end's reason leaves its subagent in, as
// kndl show says it too.
function endedAs(reason) {
  return reason === "stopped" || reason === "interrupted" ? reason : "finished";
}

// trackAgent follows the subagents through the Events: the Agent calls
// that describe them, their start, a stop asked, their end.
function trackAgent(ev) {
  let parentLearnt = false;
  if (ev.agent && ev.parent && !agentParents.has(ev.agent)) {
    agentParents.set(ev.agent, ev.parent);
    parentLearnt = agents.has(ev.agent);
  }
  const a = agents.get(ev.agent);
  switch (ev.kind) {
    case "tool_use":
      if (ev.tool === "Agent") agentCalls.set(ev.tool_id, ev.input || {});
      if (ev.tool === "Agent" || parentLearnt) break; // a description to show
      return;
    case "subagent_start":
      if (a) a.state = "running"; // resumed
      else agents.set(ev.agent, { type: ev.text || "", state: "running" });
      break;
    case "subagent_stop":
      if (!a || a.state !== "running") return;
      a.state = "stopping";
      break;
    case "subagent_end":
      if (!a) return;
      a.state = endedAs(ev.reason);
      break;
    default:
      if (!parentLearnt) return;
  }
  showAgents();
}

// showAgents lists the subagents: their type, what their Agent call says
// they do, whether they run; the Creator's list has a Stop button by each
// running one.
function showAgents() {
  const list = document.getElementById("subagents");
  list.replaceChildren();
  for (const [agent, a] of agents) {
    const parent = agentParents.get(agent) || "";
    const call = agentCalls.get(parent) || {};
    const li = el("li", "subagent state-" + a.state);
    li.dataset.agent = agent;
    const desc = el("button", "agent-desc", call.description || summary("Agent", { prompt: call.prompt }) || agent);
    desc.type = "button";
    desc.dataset.action = "show-subagent";
    desc.title = "Show its transcript";
    li.append(el("span", "agent-type", a.type || call.subagent_type || "subagent"), desc, el("span", "agent-state", a.state));
    if (isCreator && a.state === "running") {
      const stop = el("button", "quiet", "Stop");
      stop.type = "button";
      stop.dataset.action = "stop-subagent";
      stop.title = "Stop this subagent at its next tool call; the conversation goes on";
      li.append(stop);
    }
    list.append(li);
  }
  document.getElementById("subagents-box").hidden = agents.size === 0;
}

// A subagent's description opens the Agent call its transcript is under.
on("show-subagent", (b) => {
  const call = tools.get(agentParents.get(b.closest("li").dataset.agent));
  if (!call) return;
  call.querySelector(":scope > details").open = true;
  call.scrollIntoView({ block: "start", behavior: "smooth" });
});

if (isCreator) {
  on("stop-subagent", async (b) => {
    const agent = b.closest("li").dataset.agent;
    const error = document.getElementById("subagents-error");
    showError(error, null);
    b.disabled = true;
    b.textContent = "Stopping…";
    try {
      await api("POST", paths.stopSubagent(id, agent));
    } catch (err) {
      showError(error, err);
      b.disabled = false;
      b.textContent = "Stop";
    }
  });
}

// --- Claude's questions ---

const questions = new Map(); // question id -> its card

// addQuestion shows what Claude asks (AskUserQuestion), each question with
// its options; the Creator answers with an option or in their own words,
// once every question has an answer. Others see the question alone.
function addQuestion(ev) {
  const li = item(ev, "question");
  const asked = ev.input && Array.isArray(ev.input.questions) ? ev.input.questions : [];
  if (!asked.length) {
    li.append(el("div", "who", "Claude asks for permission"), el("pre", "tool-input", JSON.stringify(ev.input ?? {}, null, 2)));
    return;
  }
  li.append(el("div", "who", "Claude asks"));
  questions.set(ev.tool_id, li);
  const picks = asked.map(() => null);
  const status = el("div", "answer-status");
  const send = async () => {
    if (picks.some((p) => p === null)) return;
    try {
      await api("POST", paths.answer(id), { question_id: ev.tool_id, answers: picks });
      // The answer's Event may have come first, over the WebSocket.
      if (!li.classList.contains("answered")) status.textContent = "Sending…";
    } catch (err) {
      showError(status, err);
    }
  };
  asked.forEach((q, i) => {
    const box = el("div", "ask");
    box.append(el("div", "ask-text", q.question ?? ""));
    const opts = el("div", "ask-options");
    (q.options ?? []).forEach((o, n) => {
      const b = el(isCreator ? "button" : "span", "ask-option", o.label ?? "");
      if (o.description) b.title = o.description;
      if (isCreator) {
        b.type = "button";
        b.addEventListener("click", () => {
          for (const x of opts.children) x.classList.remove("picked");
          b.classList.add("picked");
          picks[i] = { option: n + 1 };
          send();
        });
      }
      opts.append(b);
    });
    box.append(opts);
    if (isCreator) {
      const own = el("form", "ask-own");
      const input = el("input");
      input.placeholder = "Or answer in your own words";
      input.name = "text";
      own.append(input, el("button", "", "Answer"));
      own.addEventListener("submit", (e) => {
        e.preventDefault();
        if (!input.value.trim()) return;
        for (const x of opts.children) x.classList.remove("picked");
        picks[i] = { text: input.value };
        send();
      });
      box.append(own);
    }
    li.append(box);
  });
  li.append(status);
}

// answered marks a question's card with its answer; no one answers it again.
function answered(card, text) {
  card.classList.add("answered");
  for (const b of card.querySelectorAll("button, input")) b.disabled = true;
  card.querySelector(".answer-status").textContent = "Answered: " + text;
}

let nearBottom = true;
window.addEventListener("scroll", () => {
  nearBottom = window.innerHeight + window.scrollY >= document.body.scrollHeight - 80;
});

// --- The Session, its queue ---

function showSession(s) {
  state = s.state;
  showState(document.getElementById("state"), s);
  showActivity(document.getElementById("activity"), s);
  document.getElementById("failed").hidden = s.state !== "failed";
  document.getElementById("failed-reason").textContent = s.state_detail || "no reason was recorded";
  document.getElementById("model").textContent = s.model || "default";
  document.getElementById("effort").textContent = s.effort || "default";
  document.getElementById("title").textContent = s.title;
  showSandboxGit(document.getElementById("sandbox-git"), s.sandbox_git);
  showSpent(document.getElementById("usage"), s.usage);
  showBranches(s.branches || []);
  if (isCreator) {
    showQueue(s.queue.filter((p) => p.state === "queued"));
    const settings = document.getElementById("settings-form");
    modelChoice.then((set) => {
      if (!settings.contains(document.activeElement)) set(s.model, s.effort);
    }, () => {}); // the settings say why, below
    document.getElementById("sleep").hidden = !(s.state === "active" || s.state === "frozen");
    document.getElementById("wake").hidden = s.state !== "asleep"; // a failed one has Retry
    document.getElementById("restart").hidden = s.state !== "active";
    document.getElementById("archive").hidden = s.state === "archived" || s.state === "starting";
    document.getElementById("restore").hidden = s.state !== "archived";
    document.getElementById("fork").hidden = s.state !== "asleep" && s.state !== "failed"; // a fork copies a stopped Sandbox
    for (const [el, field] of [["keep-awake", "keep_awake"], ["thread-context", "thread_context"]]) {
      const sw = document.getElementById(el);
      if (!sw.disabled) sw.checked = !!s[field]; // not while the switch's own change is on its way
    }
  }
  if (terminal) terminal.active(s.state === "active");
}

// showSpent says what the Session spent, once it spent anything.
function showSpent(span, spent) {
  const any = spent && spent.models && spent.models.length > 0;
  span.hidden = !any;
  if (!any) return;
  span.textContent = "spent " + spentText(spent);
  span.title = spentByModel(spent);
}

// showSandboxGit says what git in the Sandbox may do with its token: a
// read-only Creator's Sandbox can't push.
function showSandboxGit(span, git) {
  span.hidden = !git;
  span.textContent = git === "read" ? "Git: read-only, its Creator can't push to this Repo" : "Git: push and pull requests";
}

// link is an anchor to a GitHub page, or plain text for an address that
// is not http(s).
function link(href, text) {
  if (!/^https?:\/\//.test(href || "")) return el("span", "", text);
  const a = el("a", "", text);
  a.href = href;
  a.rel = "noopener noreferrer";
  a.target = "_blank";
  return a;
}

// The pull request form, on the Creator's page alone: a branch without an
// open pull request gets a button that opens it, prefilled with the
// Session's title and its last Turn's text.
const pullForm = document.getElementById("pull-form");
let lastTurnText = []; // the main conversation's text since the last prompt

function trackTurnText(ev) {
  if (ev.agent) return; // a subagent's
  if (ev.kind === "prompt") lastTurnText = [];
  if (ev.kind === "text") lastTurnText.push(ev.text);
}

function openPullForm(branch) {
  pullForm.dataset.branch = branch;
  document.getElementById("pull-branch").textContent = branch;
  pullForm.elements.title.value = document.getElementById("title").textContent;
  pullForm.elements.body.value = lastTurnText.join("\n\n");
  showError(document.getElementById("pull-error"), null);
  pullForm.hidden = false;
  pullForm.elements.title.focus();
}

if (pullForm) {
  submit(pullForm, document.getElementById("pull-error"), async (f) => {
    await api("POST", paths.pulls(id), { branch: pullForm.dataset.branch, title: f.title, body: f.body, base: f.base.trim() });
    pullForm.hidden = true; // the branch's pull request comes over the WebSocket
  });
  document.getElementById("pull-cancel").addEventListener("click", () => (pullForm.hidden = true));
}

// showBranches lists the branches the Session pushed, each with the pull
// requests opened from it.
function showBranches(branches) {
  document.getElementById("branches-box").hidden = branches.length === 0;
  document.getElementById("branches").replaceChildren(...branches.map((b) => {
    const li = el("li", "branch");
    li.dataset.branch = b.name;
    li.append(link(b.url, b.name));
    for (const p of b.pulls || []) {
      const pr = link(p.url, `#${p.number} ${p.title}`);
      pr.classList.add("pull");
      const note = el("span", "note pull-state", pullLine(p));
      note.dataset.checks = p.checks || "";
      note.dataset.review = p.review || "";
      li.append(pr, note);
    }
    if (pullForm && !(b.pulls || []).some((p) => p.state === "open")) {
      const open = el("button", "quiet open-pull", "Open pull request");
      open.type = "button";
      open.addEventListener("click", () => openPullForm(b.name));
      li.append(open);
    }
    return li;
  }));
}

let queueShown = []; // the queue as last drawn

function showQueue(queue) {
  const box = document.getElementById("queue-box");
  const list = document.getElementById("queue");
  if (list.querySelector("textarea")) return; // being edited
  queueShown = queue;
  list.replaceChildren();
  const button = (label, action, title) => {
    const b = el("button", "quiet", label);
    b.type = "button";
    b.dataset.action = action;
    if (title) b.title = title;
    return b;
  };
  queue.forEach((p, i) => {
    const li = el("li");
    li.dataset.id = p.id;
    li.dataset.place = i + 1;
    li.append(el("span", "text", p.text));
    if (p.source) li.append(el("span", "note", "from " + sourceName(p.source)));
    if (p.attachments) li.append(el("span", "note", p.attachments.map((a) => a.name).join(", ")));
    const up = button("↑", "move-prompt-up", "Deliver earlier");
    up.disabled = i === 0;
    const down = button("↓", "move-prompt-down", "Deliver later");
    down.disabled = i === queue.length - 1;
    li.append(up, down, button("Edit", "edit-prompt"), button("Cancel", "cancel-prompt"));
    list.append(li);
  });
  box.hidden = queue.length === 0;
}

if (isCreator) {
  const form = document.getElementById("prompt-form");
  const text = document.getElementById("prompt");
  const error = document.getElementById("prompt-error");
  const files = picker(id, form, document.getElementById("attach-input"), document.getElementById("attach-list"));
  const attachStatus = document.getElementById("attach-status");
  const send = async () => {
    showError(error, null);
    try {
      const attachments = await files.upload((s) => (attachStatus.textContent = s));
      await api("POST", paths.prompts(id), { text: text.value, is_command: form.elements.command.checked, attachments });
      text.value = "";
      form.elements.command.checked = false;
      files.clear();
    } catch (err) {
      attachStatus.textContent = "";
      showError(error, err);
    }
  };
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    send();
  });
  text.addEventListener("keydown", (e) => {
    if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) {
      e.preventDefault();
      send();
    }
  });
  const settings = document.getElementById("settings-form");
  const settingsError = document.getElementById("settings-error");
  modelChoice.catch((err) => showError(settingsError, err));
  settings.addEventListener("submit", async (e) => {
    e.preventDefault();
    showError(settingsError, null);
    try {
      await api("PATCH", paths.session(id), { model: settings.elements.model.value, effort: settings.elements.effort.value });
    } catch (err) {
      showError(settingsError, err);
    }
  });
  // Retry is a wake of a failed Session.
  for (const [action, path] of [["sleep", "sleep"], ["wake", "wake"], ["restart", "restart"], ["retry", "wake"], ["archive", "archive"], ["restore", "restore"]]) {
    on(action, async (b) => {
      if (action === "archive" && !confirm("Delete this Session? Its Sandbox is removed now; its Runner keeps its disks and Workspace for a while, and Restore brings it back until then.")) return;
      showError(settingsError, null);
      b.disabled = true;
      try {
        await api("POST", paths.act(id, path));
      } catch (err) {
        showError(settingsError, err);
      } finally {
        b.disabled = false;
      }
    });
  }
  // The Creator's switches, each set by its own PUT.
  for (const [el, path] of [["keep-awake", paths.keepAwake], ["thread-context", paths.threadContext]]) {
    const sw = document.getElementById(el);
    sw.addEventListener("change", async () => {
      showError(settingsError, null);
      sw.disabled = true;
      try {
        await api("PUT", path(id), { on: sw.checked });
      } catch (err) {
        sw.checked = !sw.checked;
        showError(settingsError, err);
      } finally {
        sw.disabled = false;
      }
    });
  }
  on("stop-turn", async () => {
    try {
      await api("POST", paths.act(id, "stop-turn"));
    } catch (err) {
      showError(error, err);
    }
  });
  on("cancel-prompt", async (b) => {
    const pid = b.closest("li").dataset.id;
    try {
      await api("DELETE", paths.prompt(id, pid));
      b.closest("li").remove();
    } catch (err) {
      showError(error, err);
    }
  });
  const move = (by) => async (b) => {
    const li = b.closest("li");
    try {
      await api("POST", paths.movePrompt(id, li.dataset.id), { position: Number(li.dataset.place) + by });
    } catch (err) {
      showError(error, err);
    }
  };
  on("move-prompt-up", move(-1));
  on("move-prompt-down", move(1));
  on("edit-prompt", (b) => {
    const li = b.closest("li");
    const area = el("textarea");
    area.value = li.querySelector(".text").textContent;
    const save = el("button", "", "Save");
    save.type = "button";
    save.dataset.action = "save-prompt";
    li.replaceChildren(area, save);
  });
  on("save-prompt", async (b) => {
    const li = b.closest("li");
    try {
      const text = li.querySelector("textarea").value;
      await api("PATCH", paths.prompt(id, li.dataset.id), { text });
      // Drawn again at once, buttons and all; the Session's next message
      // brings the queue as the Hub has it.
      li.querySelector("textarea").remove();
      showQueue(queueShown.map((p) => (p.id === li.dataset.id ? { ...p, text } : p)));
    } catch (err) {
      showError(error, err);
    }
  });
}

// --- Ports ---

// showPorts lists the open ports and those the Environment offers, each
// offered one with its label (a person's words, put in as text) and, until
// something listens on it, nothing to open.
function showPorts(ports) {
  const table = document.getElementById("ports");
  const body = table.querySelector("tbody");
  body.replaceChildren();
  for (const p of ports) {
    const tr = el("tr");
    tr.dataset.port = p.port;
    tr.classList.toggle("waiting", !p.listening);
    const where = p.listening ? (p.addresses || []).join(", ") : "not listening yet";
    tr.append(el("td", "", String(p.port)), el("td", "label", p.label || ""), el("td", "", where), el("td", "", p.process ? `${p.process} (${p.pid})` : ""));
    const open = el("td");
    if (p.url) {
      const a = el("a", "button", "Open");
      a.href = p.url;
      a.target = "_blank";
      a.rel = "noopener noreferrer";
      open.append(a);
    }
    tr.append(open);
    body.append(tr);
  }
  table.hidden = ports.length === 0;
  document.getElementById("ports-empty").hidden = ports.length > 0;
  document.getElementById("port-count").textContent = ports.length ? `(${ports.length})` : "";
}

// --- Tabs ---

on("tab", async (b) => {
  for (const t of document.querySelectorAll(".tab")) t.classList.toggle("active", t === b);
  for (const p of document.querySelectorAll(".pane")) p.hidden = p.id !== "pane-" + b.dataset.tab;
  if (b.dataset.tab === "changes") changes.shown();
  if (b.dataset.tab === "terminal" && !terminal) {
    const mod = await import("./terminal.js");
    terminal = mod.mount(document.getElementById("terminal"), document.getElementById("terminal-box"), document.getElementById("terminal-status"), send);
    terminal.active(state === "active");
    terminal.open();
  }
});
on("fit", () => terminal && terminal.fit());
on("changes-refresh", () => changes.refresh());

// --- The socket ---

const send = live(() => paths.sessionLive(id, lastSeq), {
  open: () => {
    root.classList.remove("offline");
    if (terminal) terminal.open(); // a reconnect waits for a fresh snapshot
  },
  close: () => {
    root.classList.add("offline");
    if (terminal) terminal.disconnected();
  },
  message: (msg) => {
    switch (msg.type) {
      case "event":
        addEvent(msg.event, msg.html || "", msg.attachments || [], msg.spent, msg.source);
        break;
      case "session":
        showSession(msg.session);
        break;
      case "ports":
        showPorts(msg.ports || []);
        break;
      case "terminal":
      case "terminal.wait":
      case "terminal.closed":
        if (terminal) terminal.message(msg);
        break;
      case "error":
        if (terminal) terminal.status(msg.message);
        break;
    }
  },
});

// The title counts your Sessions that wait on you, this one among them.
follow();
