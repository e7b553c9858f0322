// The Changes tab: a Session's Workspace against the branch it started
// from, as its Runner computed it and the Hub masked it. It is fetched when
// the tab opens and again when a Turn ends while it is open (stale until
// then otherwise), never on a timer. Everything is written with
// textContent.
import { api, el, showError } from "./app.js";
import * as paths from "./paths.js";

// A file's diff of more lines than this starts collapsed.
const collapseLines = 400;

// mount draws the tab in pane for Session id and returns its refresh and
// its turnEnded, which refreshes it now if shown or when it is next shown.
export function mount(pane, id) {
  const status = pane.querySelector("#changes-status");
  const errEl = pane.querySelector("#changes-error");
  const body = pane.querySelector("#changes");
  let stale = true;
  let loading = null;

  async function refresh() {
    if (loading) return loading;
    status.textContent = "Loading…";
    loading = api("GET", paths.changes(id))
      .then((ch) => {
        stale = false;
        showError(errEl, null);
        draw(body, ch);
        status.textContent = "";
      })
      .catch((err) => {
        status.textContent = "";
        showError(errEl, err);
      })
      .finally(() => (loading = null));
    return loading;
  }

  return {
    shown: () => stale && refresh(),
    turnEnded: () => (pane.hidden ? (stale = true) : refresh()),
    refresh,
  };
}

function draw(body, ch) {
  const head = el("p", "note");
  head.id = "changes-summary";
  head.textContent = `${ch.files.length} ${ch.files.length === 1 ? "file" : "files"} changed against ${ch.base || "its start"} (${ch.base_commit.slice(0, 12)})` +
    (ch.branch ? `, on ${ch.branch}` : "");
  const parts = [head];
  if (ch.commits.length) {
    const list = el("ul", "commits");
    list.id = "changes-commits";
    for (const c of ch.commits) {
      const li = el("li");
      li.dataset.hash = c.hash;
      li.append(el("code", "", c.hash.slice(0, 12)), " ", el("span", "", c.subject), " ",
        el("span", c.pushed ? "badge pushed" : "badge", c.pushed ? "pushed" : "not pushed"));
      list.append(li);
    }
    parts.push(el("h3", "", "Commits"), list);
  }
  if (ch.cut) {
    const cut = el("p", "error", ch.cut);
    cut.id = "changes-cut";
    parts.push(cut);
  }
  for (const f of ch.files) parts.push(fileDiff(f));
  body.replaceChildren(...parts);
}

function fileDiff(f) {
  const details = el("details", "diff-file");
  details.dataset.path = f.path;
  details.dataset.status = f.status;
  const lines = f.diff ? f.diff.replace(/\n$/, "").split("\n") : [];
  details.open = !f.omitted && lines.length <= collapseLines;
  const sum = el("summary");
  sum.append(el("span", "status status-" + f.status, f.status), " ",
    el("code", "", f.old_path ? `${f.old_path} → ${f.path}` : f.path), " ",
    el("span", "add", `+${f.additions}`), " ", el("span", "del", `-${f.deletions}`));
  if (f.omitted) sum.append(" ", el("span", "note", "(left out: past the limit)"));
  else if (lines.length > collapseLines) sum.append(" ", el("span", "note", `(${lines.length} lines: open to see)`));
  details.append(sum);
  if (lines.length) {
    const pre = el("pre", "diff");
    for (const line of lines) pre.append(el("span", lineClass(line), line));
    details.append(pre);
  }
  return details;
}

// lineClass colours a line of a unified diff by what it is.
function lineClass(line) {
  if (line.startsWith("+++") || line.startsWith("---") || line.startsWith("diff --git") || line.startsWith("index ")) return "meta";
  if (line.startsWith("@@")) return "hunk";
  if (line.startsWith("+")) return "add";
  if (line.startsWith("-")) return "del";
  return "";
}
