// An attempt set's page: Keep this one, for its Creator, puts the other
// attempts to sleep or archives them, then opens the kept one's view,
// whose Open pull request opens its pull request.
import { api, on, showError } from "./app.js";
import * as paths from "./paths.js";

const errors = document.getElementById("attempts-error");

on("keep", async (button) => {
  button.disabled = true;
  showError(errors, null);
  try {
    await api("POST", paths.keepAttempt(button.dataset.set), { session_id: button.dataset.id, others: button.dataset.others });
    location.assign("/sessions/" + encodeURIComponent(button.dataset.id));
  } catch (err) {
    showError(errors, err);
    button.disabled = false;
  }
});
