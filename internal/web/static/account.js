import { api, on, showError, submit } from "./app.js";
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

// Notification webhooks: one form adds a webhook, or edits the one whose
// Edit was clicked (an edit starts a stopped webhook again).
const hookForm = document.getElementById("webhook-form");
const hookError = document.getElementById("webhook-error");
submit(hookForm, hookError, async (f) => {
  const body = { url: f.url.trim(), format: f.format };
  if (f.webhook) {
    await api("PUT", paths.webhook(f.webhook), body);
    location.reload();
    return;
  }
  const added = await api("POST", paths.webhooks, body);
  hookForm.reset();
  document.getElementById("webhook-secret").textContent = added.secret;
  document.getElementById("webhook-added").hidden = false;
});

on("edit-webhook", (button) => {
  const f = hookForm.elements;
  f.webhook.value = button.dataset.id;
  f.url.value = button.dataset.url;
  f.format.value = button.dataset.format;
  hookForm.querySelector("button[type=submit]").textContent = "Save";
  f.url.focus();
});

on("remove-webhook", async (button) => {
  if (!confirm("Remove this webhook? The Hub stops posting to it.")) return;
  try {
    await api("DELETE", paths.webhook(button.dataset.id));
    location.reload();
  } catch (err) {
    showError(hookError, err);
  }
});

// The browser's own notifications: permission is asked on a click, never
// on load (waiting.js raises them).
const notifyState = document.getElementById("browser-notify-state");
const notifyButton = document.getElementById("browser-notify");
function showNotifyState() {
  if (!("Notification" in window)) {
    notifyState.textContent = "This browser has no notifications.";
    notifyButton.hidden = true;
    return;
  }
  const said = {
    granted: "On: this browser tells you of a question waiting on your Sessions while a kndl page is open.",
    denied: "Blocked in this browser's site settings; allow notifications there to turn them on.",
    default: "Off.",
  };
  notifyState.textContent = said[Notification.permission];
  notifyButton.hidden = Notification.permission !== "default";
}
on("browser-notify", async () => {
  await Notification.requestPermission();
  showNotifyState();
});
showNotifyState();
