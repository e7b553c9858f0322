import { api, on, submit } from "./app.js";
import * as paths from "./paths.js";

submit(document.getElementById("invite"), document.getElementById("invite-error"), async (f) => {
  const inv = await api("POST", paths.invites, { github_login: f.login.trim(), expires_in_hours: Number(f.hours) || 0 });
  document.getElementById("invite-link").textContent = inv.url;
  document.getElementById("invited").hidden = false;
  document.getElementById("invite").reset();
});

on("revoke-invite", async (button) => {
  await api("DELETE", paths.invite(button.dataset.id));
  location.reload();
});

on("remove-member", async (button) => {
  if (!confirm(`Remove ${button.dataset.name}? They are signed out everywhere at once and their Sessions stop.`)) return;
  await api("DELETE", paths.member(button.dataset.id));
  location.reload();
});
