// Shared by every app page. Markup holds no code: a control names its
// action in data-action, and one delegated listener looks the action up in
// a registry (never on window). Every value is put in the page as text.

const actions = new Map();

// on registers what a click on an element with data-action=name does.
export function on(name, fn) {
  actions.set(name, fn);
}

document.addEventListener("click", (e) => {
  const el = e.target.closest("[data-action]");
  if (!el || !actions.has(el.dataset.action)) return;
  e.preventDefault();
  actions.get(el.dataset.action)(el, e);
});

// api calls the Hub's API with the sign-in cookie and returns the decoded
// answer; it throws an Error with the Hub's message.
export async function api(method, path, body) {
  const opts = { method, credentials: "same-origin", headers: {} };
  if (body !== undefined) {
    opts.headers["Content-Type"] = "application/json";
    opts.body = JSON.stringify(body);
  }
  const resp = await fetch(path, opts);
  if (!resp.ok) {
    const err = await resp.json().catch(() => ({}));
    throw new Error(err.message || `${resp.status} ${resp.statusText}`);
  }
  if (resp.status === 204) return null;
  return resp.json();
}

// showError puts a message in an error element, or hides it.
export function showError(el, err) {
  if (!el) return;
  el.textContent = err ? String(err.message || err) : "";
  el.hidden = !err;
}

// el makes an element with a class and text.
export function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text !== undefined) e.textContent = text;
  return e;
}

// form reads a form's fields by name.
export function fields(form) {
  return Object.fromEntries(new FormData(form).entries());
}

// submit runs fn on a form's submit, showing its error in errEl.
export function submit(form, errEl, fn) {
  if (!form) return;
  form.addEventListener("submit", async (e) => {
    e.preventDefault();
    const button = form.querySelector("button[type=submit]");
    if (button) button.disabled = true;
    showError(errEl, null);
    try {
      await fn(fields(form));
    } catch (err) {
      showError(errEl, err);
    } finally {
      if (button) button.disabled = false;
    }
  });
}
