import { api, on, submit } from "./app.js";

const hub = document.getElementById("hub-url").content.textContent.trim();

submit(document.getElementById("pair"), document.getElementById("pair-error"), async (f) => {
  const r = await api("POST", "/api/runners", { name: f.name.trim() });
  document.getElementById("pair-command").textContent = `RUNNER_TOKEN=${r.token} KNDL_HUB_URL=${hub} kndl runner`;
  document.getElementById("paired").hidden = false;
  document.getElementById("pair").reset();
});

on("revoke", async (button) => {
  if (!confirm(`Remove Runner ${button.dataset.name}? Its token stops working at once.`)) return;
  await api("DELETE", "/api/runners/" + encodeURIComponent(button.dataset.id));
  location.reload();
});
