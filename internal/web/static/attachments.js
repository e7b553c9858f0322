// Attachments: the files the Creator attaches to a prompt, from a file
// picker or dropped on the prompt box, uploaded as the prompt is sent; and
// each prompt's files in the transcript, as downloads. Names and sizes are
// put in the page as text.
import { api, el } from "./app.js";
import * as paths from "./paths.js";

// size is a file's size as people read it.
export function size(n) {
  if (n >= 1 << 20) return (n / (1 << 20)).toFixed(1) + " MiB";
  if (n >= 1 << 10) return (n / (1 << 10)).toFixed(1) + " KiB";
  return n + " B";
}

// attachedLine is a line the Runner adds to a prompt for each of its files
// (protocol.AttachedLine), which the list of files shows instead.
const attachedLine = /^Attached: @\/workspace\/\.kndl\/attachments\/[0-9a-f-]{36}\/\S+\s*$/;

// promptText is a prompt's text without the lines naming its files.
export function promptText(text, files) {
  if (!files.length) return text;
  return text.split("\n").filter((l) => !attachedLine.test(l)).join("\n").trimEnd();
}

// fileList lists a prompt's files, each a download from the Hub, with its
// size and type.
export function fileList(session, files) {
  const ul = el("ul", "attachments");
  for (const a of files) {
    const li = el("li");
    const link = el("a", "attachment", a.name);
    link.href = paths.attachment(session, a.id);
    link.setAttribute("download", "");
    li.append(link, el("span", "note", `${size(a.size)} · ${a.type}`));
    ul.append(li);
  }
  return ul;
}

// picker keeps the files chosen for the next prompt, from input or dropped
// on zone, listed in box, each with a button that takes it back. upload
// sends each to the Session once and returns their ids; clear starts again.
export function picker(session, zone, input, box) {
  let files = [];
  const uploaded = new Map(); // File -> attachment id, so a prompt sent again uploads nothing twice
  const show = () => {
    box.replaceChildren();
    files.forEach((f, i) => {
      const chip = el("span", "chip");
      const x = el("button", "quiet", "×");
      x.type = "button";
      x.title = "Take it back";
      x.addEventListener("click", () => {
        files.splice(i, 1);
        show();
      });
      chip.append(el("span", "", f.name), el("span", "note", size(f.size)), x);
      box.append(chip);
    });
    box.hidden = files.length === 0;
  };
  const add = (list) => {
    files.push(...list);
    show();
  };
  input.addEventListener("change", () => {
    add(input.files);
    input.value = "";
  });
  zone.addEventListener("dragover", (e) => {
    if (!e.dataTransfer.types.includes("Files")) return;
    e.preventDefault();
    zone.classList.add("dropping");
  });
  zone.addEventListener("dragleave", () => zone.classList.remove("dropping"));
  zone.addEventListener("drop", (e) => {
    zone.classList.remove("dropping");
    if (!e.dataTransfer.files.length) return;
    e.preventDefault();
    add(e.dataTransfer.files);
  });
  return {
    async upload(status) {
      const ids = [];
      for (const f of files) {
        if (!uploaded.has(f)) {
          status(`Uploading ${f.name}…`);
          const a = await api("POST", paths.upload(session, f.name), f);
          uploaded.set(f, a.id);
        }
        ids.push(uploaded.get(f));
      }
      status("");
      return ids;
    },
    clear() {
      files = [];
      uploaded.clear();
      show();
    },
  };
}
