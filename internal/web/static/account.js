import { api, on, submit } from "./app.js";

const error = document.getElementById("token-error");

submit(document.getElementById("token-form"), error, async (f) => {
  await api("PUT", "/api/account/claude-token", { token: f.token.trim() });
  location.reload();
});

on("remove-token", async () => {
  if (!confirm("Remove your setup token? Your Sessions can't start or wake without one.")) return;
  await api("DELETE", "/api/account/claude-token");
  location.reload();
});
