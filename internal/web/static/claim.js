// The Setup link's or Invite's secret is in the URL's fragment, which the
// browser never sends to a server. Take it out of the address bar at once,
// hand it to the Hub in a POST just before going to GitHub, and let the Hub
// hold it in a cookie until GitHub sends the browser back.
const secret = decodeURIComponent(location.hash.slice(1));
history.replaceState(null, "", location.pathname);

const button = document.getElementById("claim");
const error = document.getElementById("claim-error");

function fail(text) {
  error.textContent = text;
  error.hidden = false;
}

if (!secret) {
  fail("This link has no secret in it: open the whole link you were given.");
} else {
  button.disabled = false;
  button.addEventListener("click", async () => {
    button.disabled = true;
    try {
      const resp = await fetch("/signin/claim", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({ secret }),
        credentials: "same-origin",
      });
      if (!resp.ok) {
        const body = await resp.json().catch(() => ({}));
        throw new Error(body.message || resp.statusText);
      }
      location.assign("/signin/github");
    } catch (e) {
      fail("The Hub did not take the link: " + e.message);
      button.disabled = false;
    }
  });
}
