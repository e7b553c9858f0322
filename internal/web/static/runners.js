import { api, on, showError, submit } from "./app.js";
import * as paths from "./paths.js";

const hub = document.getElementById("hub-url").content.textContent.trim();
const errors = document.getElementById("runners-error");

submit(document.getElementById("pair"), document.getElementById("pair-error"), async (f) => {
  const r = await api("POST", paths.runners, { name: f.name.trim() });
  document.getElementById("pair-command").textContent = `RUNNER_TOKEN=${r.token} KNDL_HUB_URL=${hub} kndl runner`;
  document.getElementById("paired").hidden = false;
  document.getElementById("pair").reset();
});

// change asks the Hub, then shows the page again, or the Hub's words.
async function change(method, path, body) {
  showError(errors, null);
  try {
    await api(method, path, body);
    location.reload();
  } catch (err) {
    showError(errors, err);
  }
}

on("revoke", async (button) => {
  if (!confirm(`Remove Runner ${button.dataset.name}? Its token stops working at once, and its Sessions fail.`)) return;
  await change("DELETE", paths.runner(button.dataset.id));
});

on("share", async (button) => {
  if (!confirm(`Share Runner ${button.dataset.name}? Every Member's Sessions may then run on it, and whoever runs that machine can read their setup tokens and Workspaces.`)) return;
  await change("PUT", paths.runnerShared(button.dataset.id), { shared: true });
});

on("unshare", async (button) => {
  if (!confirm(`Unshare Runner ${button.dataset.name}? Only its owner's Sessions run on it then; the others there go to sleep and can't wake on it.`)) return;
  await change("PUT", paths.runnerShared(button.dataset.id), { shared: false });
});
