import { api, on, submit } from "./app.js";

const error = document.getElementById("token-error");

const form = document.getElementById("token-form");
submit(form, error, async (f) => {
  await api("PUT", "/api/account/claude-token", { token: f.token.trim() });
  form.reset();
  document.getElementById("token-state").textContent = "Stored just now. It is never shown again.";
});

on("remove-token", async () => {
  if (!confirm("Remove your setup token? Your Sessions can't start or wake without one.")) return;
  await api("DELETE", "/api/account/claude-token");
  location.reload();
});
