import { api, on, submit } from "./app.js";
import * as paths from "./paths.js";

const error = document.getElementById("token-error");

const form = document.getElementById("token-form");
submit(form, error, async (f) => {
  await api("PUT", paths.claudeToken, { token: f.token.trim() });
  form.reset();
  document.getElementById("token-state").textContent = "Stored just now. It is never shown again.";
});

on("remove-token", async () => {
  if (!confirm("Remove your setup token? Your Sessions can't start or wake without one.")) return;
  await api("DELETE", paths.claudeToken);
  location.reload();
});
