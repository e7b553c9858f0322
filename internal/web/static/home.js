import { api, submit } from "./app.js";

submit(document.getElementById("new-session"), document.getElementById("new-session-error"), async (f) => {
  const s = await api("POST", "/api/sessions", { repo: f.repo.trim(), prompt: f.prompt, model: f.model.trim(), effort: f.effort });
  location.assign("/sessions/" + encodeURIComponent(s.id));
});
