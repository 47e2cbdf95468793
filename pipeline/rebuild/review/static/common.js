// Shared by the review pages: the JSON API, the reviewer's name (asked once), small DOM helpers.

export async function api(path, body) {
  const options = body === undefined ? {} : {
    method: "POST", headers: {"Content-Type": "application/json"}, body: JSON.stringify(body),
  };
  const response = await fetch(path, {credentials: "same-origin", ...options});
  const data = await response.json().catch(() => ({error: `${response.status} ${response.statusText}`}));
  if (!response.ok) {
    toast(data.error || `request failed (${response.status})`, "error");
    throw new Error(data.error);
  }
  return data;
}

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on")) node.addEventListener(key.slice(2), value);
    else if (key === "class") node.className = value;
    else if (key === "text") node.textContent = value;
    else node.setAttribute(key, value === true ? "" : value);
  }
  for (const child of children.flat(Infinity)) {
    if (child !== null && child !== undefined) node.append(child);
  }
  return node;
}

export function kbd(key) {
  return el("kbd", {text: key});
}

let toastTimer = null;
export function toast(message, kind = "info") {
  const box = document.getElementById("toast");
  box.textContent = message;
  box.className = `toast ${kind} visible`;
  clearTimeout(toastTimer);
  toastTimer = setTimeout(() => { box.className = "toast"; }, kind === "error" ? 6000 : 1800);
}

const NAME_KEY = "pipeline-review-reviewer";

export function reviewerName() {
  return localStorage.getItem(NAME_KEY) || "";
}

// The reviewer's name, asked once (kept in the browser) and shown in the header; click it to change.
export function ensureReviewer() {
  const dialog = document.getElementById("reviewer-dialog");
  const input = document.getElementById("reviewer-name");
  const shown = document.getElementById("reviewer");
  const show = () => { shown.textContent = reviewerName() || "(no name)"; };
  return new Promise((resolve) => {
    const save = (event) => {
      event.preventDefault();
      const name = input.value.trim();
      if (!name) { input.focus(); return; }
      localStorage.setItem(NAME_KEY, name);
      dialog.hidden = true;
      show();
      resolve(name);
    };
    document.getElementById("reviewer-form").addEventListener("submit", save);
    shown.addEventListener("click", () => { input.value = reviewerName(); dialog.hidden = false; input.focus(); });
    if (reviewerName()) { show(); resolve(reviewerName()); return; }
    dialog.hidden = false;
    input.focus();
  });
}

// Keyboard shortcuts: ignored while typing in a field or while the name dialog is open.
// The handler returns true for a key it used.
export function onKeys(handler) {
  document.addEventListener("keydown", (event) => {
    const target = event.target;
    if (!document.getElementById("reviewer-dialog").hidden) return;
    if (event.ctrlKey || event.metaKey || event.altKey) return;
    if (target.matches && target.matches("input, textarea, select")) {
      if (event.key === "Escape") target.blur();
      return;
    }
    if (handler(event)) event.preventDefault();
  });
}

export function formatDistance(value) {
  if (value === null || value === undefined) return "";
  const magnitude = Math.abs(value);
  if (magnitude !== 0 && (magnitude >= 1e5 || magnitude < 1e-3)) return value.toExponential(3);
  return magnitude >= 100 ? value.toFixed(0) : value.toPrecision(4);
}

export function imageUrl(kind, id) {
  return `/image/${kind}/${encodeURIComponent(id)}`;
}
