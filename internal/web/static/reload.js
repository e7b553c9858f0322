// A page whose module (or a module it imports) failed to load loads itself
// again, up to three times in a row, then says so: a module that failed
// stays failed in its page, and a browser on a machine where Sandboxes
// start can fail a load at each of their network changes (Chrome:
// net::ERR_NETWORK_CHANGED). A classic script, run before the module, so
// its listeners hear the module's error.
"use strict";
(() => {
  const key = "kndl-reloads";
  const tries = 3;
  const isModule = (e) => e.target instanceof HTMLScriptElement && e.target.type === "module";
  document.addEventListener("error", (e) => {
    if (!isModule(e)) return;
    const n = Number(sessionStorage.getItem(key) || 0);
    if (n < tries) {
      sessionStorage.setItem(key, String(n + 1));
      setTimeout(() => location.reload(), 300 * (n + 1));
      return;
    }
    sessionStorage.removeItem(key);
    const p = document.createElement("p");
    p.id = "script-failed";
    p.className = "error";
    p.setAttribute("role", "alert");
    p.textContent = `This page's script did not load (${tries + 1} tries): reload the page to try again.`;
    document.body.prepend(p);
  }, true);
  document.addEventListener("load", (e) => {
    if (isModule(e)) sessionStorage.removeItem(key);
  }, true);
})();
