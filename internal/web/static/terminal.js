// The terminal mirror: the Session's pane, drawn by xterm.js from a
// snapshot and then the pane's output. The pane has one size; this tab
// shows it scaled down when it doesn't fit, and sets it to what fits when
// its person types or presses Fit to my window.
import { Terminal } from "./vendor/xterm/xterm.mjs";

// xterm.js writes its styles into <style> elements, which the page's policy
// (style-src 'self') keeps from applying. Their rules are moved into
// constructed style sheets, which the policy lets through as it does any
// style set from script.
function adoptStyles(root) {
  const sheets = new Map();
  const sync = (style) => {
    let sheet = sheets.get(style);
    if (!sheet) {
      sheet = new CSSStyleSheet();
      sheets.set(style, sheet);
      document.adoptedStyleSheets = [...document.adoptedStyleSheets, sheet];
    }
    sheet.replaceSync(style.textContent);
  };
  new MutationObserver((records) => {
    for (const r of records) {
      const style = r.target.nodeType === Node.ELEMENT_NODE && r.target.tagName === "STYLE" ? r.target : r.target.parentElement?.closest?.("style");
      if (style) sync(style);
      for (const n of r.addedNodes) {
        if (n.tagName === "STYLE") sync(n);
        else if (n.querySelectorAll) n.querySelectorAll("style").forEach(sync);
      }
    }
  }).observe(root, { subtree: true, childList: true, characterData: true });
}

// Answers xterm.js sends by itself to the program's queries (device
// attributes, cursor position, focus, OSC and DCS replies): every tab would
// send them, so none is relayed; only what the person types is.
const reply = /^(\x1b\[[?>]?[\d;]*[cRnu]|\x1b\[[IO]|\x1b\].*|\x1bP.*)$/s;

function b64(s) {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function mount(host, box, statusEl, send) {
  const css = document.createElement("link");
  css.rel = "stylesheet";
  css.href = new URL("./vendor/xterm/xterm.css", import.meta.url).href;
  document.head.append(css);
  adoptStyles(host);
  const term = new Terminal({ cols: 120, rows: 40, convertEol: false, scrollback: 1000, fontSize: 14,
    fontFamily: "ui-monospace, 'DejaVu Sans Mono', monospace", allowProposedApi: false });
  term.open(host);
  let wanted = false; // the tab is open here
  let drawn = false; // drawn from a snapshot since the last (re)open
  let active = false;
  let lastUser = 0;

  const status = (text) => {
    statusEl.textContent = text || "";
  };

  // fits returns the size that fills this tab's box.
  const fits = () => {
    const screen = host.querySelector(".xterm-screen");
    if (!screen || !screen.offsetWidth) return null;
    const cw = screen.offsetWidth / term.cols;
    const ch = screen.offsetHeight / term.rows;
    const cols = Math.max(20, Math.min(500, Math.floor((box.clientWidth - 8) / cw)));
    const rows = Math.max(5, Math.min(200, Math.floor((box.clientHeight - 8) / ch)));
    return { cols, rows };
  };

  // scale shows the pane's size shrunk to the box when it doesn't fit.
  const scale = () => {
    const screen = host.querySelector(".xterm-screen");
    if (!screen) return;
    const s = Math.min(1, (box.clientWidth - 8) / screen.offsetWidth, (box.clientHeight - 8) / screen.offsetHeight);
    host.style.transform = s < 1 ? `scale(${s})` : "";
  };
  new ResizeObserver(scale).observe(box);

  for (const type of ["keydown", "beforeinput", "paste", "mousedown", "mouseup", "wheel", "compositionend"]) {
    host.addEventListener(type, () => (lastUser = performance.now()), true);
  }
  term.onData((data) => {
    if (!drawn || !active || reply.test(data) || performance.now() - lastUser > 500) return;
    const size = fits() || {};
    send({ type: "terminal.input", data, cols: size.cols, rows: size.rows });
  });

  return {
    open() {
      wanted = true;
      drawn = false;
      if (!active) return status("The terminal is there while the Session is active.");
      status("Waiting for the screen…");
      send({ type: "terminal.open" });
    },
    active(on) {
      const was = active;
      active = on;
      if (on && !was && wanted && !drawn) this.open();
      if (!on) status("The terminal is there while the Session is active.");
    },
    fit() {
      const size = fits();
      if (size && drawn && active) send({ type: "terminal.fit", cols: size.cols, rows: size.rows });
    },
    status,
    disconnected() {
      drawn = false;
      status("Reconnecting…");
    },
    message(msg) {
      if (msg.type === "terminal.wait") {
        drawn = false;
        return status("Waiting for the screen…");
      }
      if (msg.type === "terminal.closed") {
        drawn = false;
        status(msg.message);
        setTimeout(() => wanted && !drawn && this.open(), 2000);
        return;
      }
      if (msg.snapshot) {
        term.reset();
        term.resize(msg.cols, msg.rows);
        drawn = true;
        status("");
      } else if (msg.cols) {
        term.resize(msg.cols, msg.rows);
      }
      if (msg.data) term.write(b64(msg.data));
      if (msg.snapshot || msg.cols) requestAnimationFrame(scale);
    },
  };
}
