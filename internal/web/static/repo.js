import { api, el, on, showError, showTime, submit } from "./app.js";
import * as paths from "./paths.js";

// The Repo page's Environment: its current version, the draft editor, a
// Test build's log as it runs, and the change log. Every value is put in
// the page as text.

const card = document.getElementById("environment");
const repo = card.dataset.repo;
const errors = document.getElementById("env-error");
const form = document.getElementById("draft");
const testLog = document.getElementById("test-log");

function describe(s) {
  const lines = (t) => (t ? `${t.replace(/\n$/, "").split("\n").length} lines` : "none");
  const list = (l) => (l && l.length ? l.join(", ") : "none");
  return [
    `image:              ${s.image || "the Runner's default"}`,
    `features:           ${list((s.features || []).map((f) => f.ref))}`,
    `bootstrap:          ${lines(s.bootstrap)}`,
    `start:              ${lines(s.start)}`,
    `docker:             ${s.docker ? "on" : "off"}`,
    `dependency folders: ${list(s.dependency_folders)}`,
    `next to:            ${list(nextToList(s.next_to))}`,
    `cpus:               ${s.cpus || "the Runner's default"}`,
    `memory:             ${s.memory_mib ? s.memory_mib + " MiB" : "the Runner's default"}`,
    `egress:             ${egressLine(s.egress)}`,
    `ports:              ${list((s.ports || []).map((p) => (p.label ? `${p.port} ${JSON.stringify(p.label)}` : String(p.port))))}`,
    // Names alone, as the CLI shows them (api.EnvNames).
    `container env:      ${list((s.container_env || []).map((kv) => kv.split("=")[0]))}`,
    `user:               ${s.user || "root"}`,
  ].join("\n");
}

// egressLine is the egress policy as the CLI shows it (api.EgressLine).
function egressLine(e) {
  if (!e || e.mode !== "allowlist") return "open";
  const allow = (e.allow || []).filter((a) => a !== "-github");
  return allow.length ? "allowlist: " + allow.join(", ") : "allowlist";
}

// commaList is the field's comma-separated list; the Hub checks each entry.
const commaList = (v) => v.split(",").map((p) => p.trim()).filter((p) => p);

// nextToList is next_to as people write it, file=folder, by file, as the
// CLI shows it; nextToMap reads it back (an entry without = is the Hub's
// to refuse, as a file with no folder).
const nextToList = (m) => Object.keys(m || {}).sort().map((f) => `${f}=${m[f]}`);
function nextToMap(v) {
  const m = {};
  for (const kv of commaList(v)) {
    const i = kv.indexOf("=");
    m[(i < 0 ? kv : kv.slice(0, i)).trim()] = i < 0 ? "" : kv.slice(i + 1).trim();
  }
  return m;
}

// shown are the settings the form was filled from: what it has no field
// for (the Features, the check, the branch prefix, the ports, the
// container env, the user) is kept as it is.
let shown = {};

async function load() {
  const env = await api("GET", paths.environment(repo));
  const cur = env.current;
  const current = document.getElementById("env-current");
  current.textContent = cur.version ? `Version ${cur.version}, applied ` : "No version yet: Sessions run on the Runner's defaults.";
  if (cur.version) {
    const at = el("time");
    showTime(at, cur.created_at);
    current.append(at, ".");
  }
  document.getElementById("env-settings").textContent = describe(cur.settings);
  const s = env.draft ? env.draft.settings : cur.settings;
  shown = s;
  form.image.value = s.image || "";
  form.bootstrap.value = s.bootstrap || "";
  form.start.value = s.start || "";
  form.docker.checked = !!s.docker;
  form.dependency_folders.value = (s.dependency_folders || []).join(", ");
  form.next_to.value = nextToList(s.next_to).join(", ");
  form.cpus.value = s.cpus || "";
  form.memory_mib.value = s.memory_mib || "";
  form.egress.value = (s.egress && s.egress.mode) || "open";
  form.egress_allow.value = ((s.egress && s.egress.allow) || []).join(", ");
  const state = document.getElementById("draft-state");
  const d = env.draft;
  if (!d) state.textContent = "No draft: the form shows the current version.";
  else if (!d.changes.length) state.textContent = "The draft changes nothing.";
  else {
    const test = !d.needs_test ? "It leaves the Build as it is and applies at once." : d.test ? `Its Test build ${d.test.state}.` : "It changes the Build: run a Test build before applying it.";
    state.textContent = `The draft changes: ${d.changes.join("; ")}. ${test}`;
  }
  // A draft from the devcontainer.json names it, its commit and its notes.
  const source = document.getElementById("draft-source");
  source.hidden = !(d && d.from);
  source.textContent = d && d.from ? `Made from ${d.from.path} at commit ${d.from.commit.slice(0, 12)}; notes:` : "";
  document.getElementById("draft-notes").replaceChildren(...((d && d.from && d.from.notes) || []).map((n) => el("li", "", n)));
  devcontainer.follow.checked = !!env.follows;
  if (env.follows) devcontainer.path.value = env.follows;
  const tbody = document.querySelector("#env-log tbody");
  tbody.replaceChildren();
  for (const v of await api("GET", paths.environmentLog(repo))) {
    const tr = el("tr");
    const at = el("time");
    showTime(at, v.created_at);
    tr.append(el("td", "", String(v.version)), el("td", "note"), el("td", "", v.created_by), el("td", "", v.changes.replaceAll("\n", "; ")));
    tr.children[1].append(at);
    tbody.append(tr);
  }
}

function settings() {
  return {
    ...shown,
    image: form.image.value.trim(),
    bootstrap: form.bootstrap.value,
    start: form.start.value,
    docker: form.docker.checked,
    dependency_folders: commaList(form.dependency_folders.value),
    next_to: nextToMap(form.next_to.value),
    cpus: Number(form.cpus.value) || 0,
    memory_mib: Number(form.memory_mib.value) || 0,
    // Open has no list: the Hub refuses one.
    egress: form.egress.value === "allowlist" ? { mode: "allowlist", allow: commaList(form.egress_allow.value) } : {},
  };
}

submit(form, errors, async () => {
  await api("PUT", paths.environmentDraft(repo), settings());
  await load();
});

const devcontainer = document.getElementById("devcontainer");
submit(devcontainer, errors, async () => {
  await api("POST", paths.environmentDevcontainer(repo), { path: devcontainer.path.value.trim(), follow: devcontainer.follow.checked });
  await load();
});

// follow shows a Test build's log as it grows, until it ends.
async function follow(id) {
  testLog.hidden = false;
  for (;;) {
    const t = await api("GET", paths.environmentTest(repo, id));
    testLog.textContent = t.log + (t.state === "running" ? "…" : `\nThe Test build ${t.state}${t.detail ? ": " + t.detail : "."}`);
    if (t.state !== "running") return;
    await new Promise((r) => setTimeout(r, 500));
  }
}

on("env-test", async (button) => {
  showError(errors, null);
  button.disabled = true;
  try {
    await api("PUT", paths.environmentDraft(repo), settings());
    const t = await api("POST", paths.environmentTests(repo));
    await follow(t.id);
    await load();
  } catch (err) {
    showError(errors, err);
  } finally {
    button.disabled = false;
  }
});

on("env-apply", async () => {
  showError(errors, null);
  try {
    await api("POST", paths.environmentApply(repo));
    await load();
  } catch (err) {
    showError(errors, err);
  }
});

load().catch((err) => showError(errors, err));

// The Repo's limits for its Sessions started from GitHub.
const limits = document.getElementById("limits");
const limitsError = document.getElementById("limits-error");

function showLimits(l) {
  limits.max_turns.value = l.max_turns;
  limits.max_turn_hours.value = l.max_turn_hours;
  limits.max_spend.value = l.max_spend;
  limits.max_session_spend.value = l.max_session_spend;
  limits.github_attempts.checked = l.github_attempts;
}

submit(limits, limitsError, async (f) =>
  showLimits(await api("PATCH", paths.repoLimits(repo), {
    max_turns: Number(f.max_turns),
    max_turn_hours: Number(f.max_turn_hours),
    max_spend: Number(f.max_spend),
    max_session_spend: Number(f.max_session_spend),
    github_attempts: limits.github_attempts.checked,
  })),
);
api("GET", paths.repoLimits(repo)).then(showLimits, (err) => showError(limitsError, err));

// The Repo's auto-fix settings, as the page was rendered with them.
const autoFix = document.getElementById("auto-fix");
const autoFixSaved = document.getElementById("auto-fix-saved");
submit(autoFix, document.getElementById("auto-fix-error"), async () => {
  autoFixSaved.hidden = true;
  const a = await api("PATCH", paths.autoFix(repo), {
    ci: autoFix.ci.checked,
    reviews: autoFix.reviews.checked,
    max: Number(autoFix.max.value),
  });
  autoFix.ci.checked = a.ci;
  autoFix.reviews.checked = a.reviews;
  autoFix.max.value = a.max;
  autoFixSaved.hidden = false;
});

// The Repo's trigger label, as the page was rendered with it.
const triggerLabel = document.getElementById("trigger-label");
const triggerLabelSaved = document.getElementById("trigger-label-saved");
submit(triggerLabel, document.getElementById("trigger-label-error"), async (f) => {
  triggerLabelSaved.hidden = true;
  triggerLabel.label.value = (await api("PUT", paths.triggerLabel(repo), { label: f.label })).label;
  triggerLabelSaved.hidden = false;
});
