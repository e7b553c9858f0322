import { api, on, showError, submit } from "./app.js";
import * as paths from "./paths.js";

const errors = document.getElementById("mcp-error");

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

submit(document.getElementById("add-server"), document.getElementById("server-error"), async (f) => {
  const server = { id: f.id.trim(), name: f.name.trim(), url: f.url.trim(), auth: f.auth, headers: [] };
  if (f.auth === "headers") {
    const [key, header, ...format] = f.header.split(":");
    server.headers.push({ key: (key || "").trim(), header: (header || "").trim(), format: format.join(":").trim() });
  }
  await api("POST", paths.mcpServers, server);
  location.reload();
});

submit(document.getElementById("install"), document.getElementById("install-error"), async (f) => {
  const req = { id: f.id.trim(), server: f.server, name: f.name.trim(), global: f.repo === "" };
  if (f.repo) req.repos = [f.repo];
  await api("POST", paths.installations, req);
  location.reload();
});

// Each header secret's form sends its value once; the page never shows it.
for (const form of document.querySelectorAll("form.secret")) {
  submit(form, errors, async (f) => {
    await api("PUT", paths.installationSecret(form.dataset.id, form.dataset.key), { value: f.value });
    location.reload();
  });
}

on("connect", async (button) => {
  showError(errors, null);
  try {
    const r = await api("POST", paths.installationConnect(button.dataset.id));
    location.assign(r.url);
  } catch (err) {
    showError(errors, err);
  }
});

on("disconnect", async (button) => {
  if (!confirm(`Disconnect ${button.dataset.id}? Its tokens are dropped, and running Sessions' calls to it stop at once.`)) return;
  await change("DELETE", paths.installationConnect(button.dataset.id));
});

on("off", (b) => change("PUT", paths.installationOff(b.dataset.repo, b.dataset.id)));
on("on", (b) => change("DELETE", paths.installationOff(b.dataset.repo, b.dataset.id)));

// Moving a server says first whose values and tokens the move clears.
on("move", async (button) => {
  const current = (await api("GET", paths.mcpServers)).find((s) => s.id === button.dataset.id);
  const url = prompt(`New URL of ${current.name}:`, current.url);
  if (!url) return;
  const next = { ...current, url };
  showError(errors, null);
  try {
    const dry = await api("PUT", paths.mcpServerDryRun(button.dataset.id), next);
    const clears = dry.clears.map((c) => `${c.installation}: ${c.keys.join(", ")}`);
    const warning = clears.length ? `This clears the values of ${clears.join("; ")}.` : "It clears no value.";
    const oauth = current.auth === "oauth" ? " Moving it to another origin also drops every Installation's OAuth tokens and client." : "";
    if (!confirm(`${warning}${oauth} Save?`)) return;
    await change("PUT", paths.mcpServer(button.dataset.id), next);
  } catch (err) {
    showError(errors, err);
  }
});
