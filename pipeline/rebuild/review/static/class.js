// The class page: a class's new images beside ten originals; marks saved one at a time, as clicked.
import {api, el, ensureReviewer, formatDistance, imageUrl, kbd, onKeys, reviewerName, toast} from "./common.js";

const REASON_KEYS = {
  not_representative: "n", drawing: "a", different_distribution: "d",
  unclear: "b", wrong_class: "w", near_duplicate: "u",
};
const SHORT = {
  not_representative: "not representative", drawing: "drawing / render", different_distribution: "different distribution",
  unclear: "unclear / blurry", wrong_class: "wrong class", near_duplicate: "near-duplicate",
};
const CHIP = {
  not_representative: "not repr.", drawing: "drawing", different_distribution: "distrib.",
  unclear: "unclear", wrong_class: "wrong", near_duplicate: "dup.",
};
const FILTERS = ["all", "unreviewed", "marked", "problematic"];
const S = {session: null, reasons: [], classes: [], data: null, selected: 0, filter: "all"};

function matches(c) {
  if (S.filter === "unreviewed") return !c.reviewed;
  if (S.filter === "marked") return c.marked > 0;
  if (S.filter === "problematic") return c.problematic;
  return true;
}

function neighbourClass(step) {
  const current = S.data ? S.data.index : -1;
  const n = S.classes.length;
  for (let k = 1; k <= n; k++) {
    const c = S.classes[(current + step * k + n * k) % n];
    if (matches(c) && c.wnid !== S.data.wnid) return c.wnid;
  }
  return null;
}

async function refreshSummary() {
  S.session = await api("/api/session");
  S.classes = S.session.classes;
  const done = S.classes.filter((c) => c.reviewed).length;
  const marked = S.classes.reduce((sum, c) => sum + c.marked, 0);
  document.getElementById("progress").textContent =
    `${done} of ${S.classes.length} classes reviewed · ${marked} images marked`;
}

async function load(wnid) {
  S.data = await api(`/api/class/${encodeURIComponent(wnid)}`);
  S.selected = Math.min(S.selected, S.data.images.length - 1);
  if (location.hash !== `#${wnid}`) history.replaceState(null, "", `#${wnid}`);
  render();
}

function markLabel(mark) {
  if (!mark) return null;
  const parts = [];
  if (mark.reason) parts.push(SHORT[mark.reason]);
  if (mark.note) parts.push(`“${mark.note}”`);
  return el("div", {class: "mark-label", text: parts.join(" · ")});
}

function metadataRows(meta, id) {
  const rows = [["candidate", id]];
  const uploaded = /^\d{9,10}$/.test(String(meta.date_upload_search_engine || ""))  // Flickr gives seconds since 1970
    ? new Date(Number(meta.date_upload_search_engine) * 1000).toISOString().slice(0, 19).replace("T", " ") : meta.date_upload_search_engine;
  const fields = [["search query", meta.search_key], ["taken", meta.date_taken], ["uploaded", uploaded],
    ["selection frequency", meta.selection_frequency !== undefined ? `${formatDistance(meta.selection_frequency)} (${meta.num_annotations} annotations)` : null],
    ["size", meta.width ? `${meta.width} × ${meta.height}` : null], ["photo id", meta.id_search_engine]];
  for (const [k, v] of fields) if (v !== null && v !== undefined && v !== "") rows.push([k, String(v)]);
  return rows;
}

function showInfo(i) {
  const panel = document.getElementById("info-panel");
  const image = S.data.images[i];
  const meta = image.metadata || {};
  panel.replaceChildren(
    el("button", {class: "close", text: "×", title: "close (i)", onclick: () => { panel.hidden = true; }}),
    el("h3", {text: `Image ${i + 1}`}),
    el("dl", {}, metadataRows(meta, image.id).map(([k, v]) => [el("dt", {text: k}), el("dd", {text: v})])),
    meta.flickr ? el("a", {href: meta.flickr, target: "_blank", rel: "noopener noreferrer", text: "open on Flickr"}) : null,
  );
  panel.hidden = false;
}

function card(image, i) {
  const meta = image.metadata || {};
  const title = metadataRows(meta, image.id).map(([k, v]) => `${k}: ${v}`).join("\n");
  const reasons = S.reasons.map((r) => el("button", {
    class: `reason${image.mark && image.mark.reason === r.key ? " on" : ""}`, title: r.label,
    "data-reason": r.key, onclick: (e) => { e.stopPropagation(); select(i); toggleReason(i, r.key); },
  }, CHIP[r.key]));
  const note = el("input", {class: "note", placeholder: "note (m)", value: image.mark ? image.mark.note : "",
    onchange: (e) => saveNote(i, e.target.value), onclick: (e) => e.stopPropagation()});
  return el("article", {
    class: `card${image.mark && image.mark.reason ? " marked" : ""}${i === S.selected ? " selected" : ""}`,
    "data-id": image.id, onclick: () => select(i),
  },
  el("div", {class: "frame"},
    el("img", {src: imageUrl("candidate", image.id), alt: `image ${i + 1}`, title, loading: "lazy"}),
    el("span", {class: "number", text: String((i + 1) % 10)}),
    image.new ? el("span", {class: "badge new", text: "new"}) : null,
    el("button", {class: "info", title: "details (i)", text: "i", onclick: (e) => { e.stopPropagation(); select(i); showInfo(i); }}),
  ),
  markLabel(image.mark),
  el("div", {class: "reasons"}, reasons),
  note);
}

function render() {
  const d = S.data;
  document.getElementById("class-name").replaceChildren(d.name, el("span", {class: "muted wnid", text: ` ${d.wnid} · class ${d.index + 1} of ${S.classes.length}`}));
  document.getElementById("class-gloss").textContent = d.gloss || "";
  const reviewed = document.getElementById("toggle-reviewed");
  reviewed.setAttribute("aria-pressed", String(d.state.reviewed));
  const problematic = document.getElementById("toggle-problematic");
  problematic.setAttribute("aria-pressed", String(d.state.problematic));
  const marked = d.images.filter((x) => x.mark && x.mark.reason).length;
  document.getElementById("candidate-count").textContent = `(${d.images.length}, ${marked} marked)`;
  document.getElementById("candidates").replaceChildren(...d.images.map(card));
  document.getElementById("originals").replaceChildren(...d.originals.map((o) => el("figure", {class: "original"},
    o.available ? el("img", {src: imageUrl("original", o.id), alt: o.id, title: o.id, loading: "lazy"})
      : el("div", {class: "missing", text: "no image: pass --originals"}),
    el("figcaption", {title: o.id, text: o.id.replace(/\.JPEG$/i, "").replace(/^ILSVRC2012_/, "")}))));
  document.getElementById("jump").value = "";
}

function select(i) {
  if (!S.data || i < 0 || i >= S.data.images.length) return;
  S.selected = i;
  document.querySelectorAll("#candidates .card").forEach((node, k) => node.classList.toggle("selected", k === i));
  const panel = document.getElementById("info-panel");
  if (!panel.hidden) showInfo(i);
}

async function saveMark(i, reason, note) {
  const image = S.data.images[i];
  const result = await api("/api/mark", {candidate_id: image.id, reason, note, reviewer: reviewerName()});
  image.mark = result.mark;
  render();
  toast(reason ? `image ${i + 1}: ${SHORT[reason]}` : `image ${i + 1}: ${result.mark ? "note saved" : "mark cleared"}`);
  refreshSummary();
}

function toggleReason(i, reason) {
  const mark = S.data.images[i].mark;
  const same = mark && mark.reason === reason;
  return saveMark(i, same ? null : reason, mark ? mark.note : "");
}

function saveNote(i, note) {
  const mark = S.data.images[i].mark;
  return saveMark(i, mark ? mark.reason : null, note);
}

async function setClass(field) {
  const value = !S.data.state[field];
  const result = await api("/api/class-state", {wnid: S.data.wnid, [field]: value, reviewer: reviewerName()});
  S.data.state = result.state;
  if (field === "reviewed" && value) S.data.images.forEach((x) => { x.new = false; });
  render();
  toast(`${S.data.name}: ${field} ${value ? "✓" : "✗"}`);
  await refreshSummary();
}

function go(step) {
  const wnid = neighbourClass(step);
  if (wnid) load(wnid); else toast("no other class matches the filter");
}

function jump(text) {
  const query = text.trim().toLowerCase();
  if (!query) return;
  const found = S.classes.find((c) => c.wnid.toLowerCase() === query || c.name.toLowerCase() === query)
    || S.classes.find((c) => `${c.wnid} ${c.name}`.toLowerCase().includes(query));
  if (found) load(found.wnid); else toast(`no class matches “${text}”`, "error");
}

const SHORTCUTS = [
  ["1 … 9, 0", "select image 1 … 10"], ["← →", "previous / next image"],
  ...Object.entries(REASON_KEYS).map(([reason, key]) => [key, `mark the selected image: ${SHORT[reason]} (again: unmark)`]),
  ["x", "clear the selected image's mark"], ["m", "write a note on the selected image"], ["i", "details of the selected image"],
  ["r", "class reviewed"], ["p", "class problematic"], [", .", "previous / next class (within the filter)"],
  ["/", "jump to a class"], ["f", "change the filter"],
];

function keys(event) {
  const key = event.key;
  if (/^[0-9]$/.test(key)) { select((Number(key) + 9) % 10); return true; }
  if (key === "ArrowLeft") { select(S.selected - 1); return true; }
  if (key === "ArrowRight") { select(S.selected + 1); return true; }
  const reason = Object.keys(REASON_KEYS).find((r) => REASON_KEYS[r] === key);
  if (reason) { toggleReason(S.selected, reason); return true; }
  if (key === "x" || key === "Delete" || key === "Backspace") { saveMark(S.selected, null, ""); return true; }
  if (key === "m") { document.querySelectorAll("#candidates .note")[S.selected].focus(); return true; }
  if (key === "i") { const p = document.getElementById("info-panel"); if (p.hidden) showInfo(S.selected); else p.hidden = true; return true; }
  if (key === "r") { setClass("reviewed"); return true; }
  if (key === "p") { setClass("problematic"); return true; }
  if (key === ".") { go(1); return true; }
  if (key === ",") { go(-1); return true; }
  if (key === "/") { document.getElementById("jump").focus(); return true; }
  if (key === "f") { cycleFilter(); return true; }
  return false;
}

function cycleFilter() {
  const select = document.getElementById("filter");
  select.value = FILTERS[(FILTERS.indexOf(select.value) + 1) % FILTERS.length];
  select.dispatchEvent(new Event("change"));
}

async function main() {
  await ensureReviewer();
  await refreshSummary();
  S.reasons = S.session.reasons;
  document.getElementById("revision").textContent = `${S.session.revision} (${S.session.rule})`;
  if (!S.session.near_duplicates) document.getElementById("nd-link").classList.add("disabled");
  document.getElementById("class-list").replaceChildren(...S.classes.map((c) => el("option", {value: c.wnid, text: c.name})));
  document.getElementById("legend").replaceChildren(el("span", {class: "muted", text: "mark the selected image:"}),
    ...S.reasons.map((r) => el("span", {class: "legend-item", title: r.label}, kbd(REASON_KEYS[r.key]), ` ${SHORT[r.key]}`)),
    el("span", {class: "legend-item"}, kbd("x"), " clear"), el("span", {class: "legend-item"}, kbd("m"), " note"));
  document.getElementById("shortcuts").replaceChildren(...SHORTCUTS.map(([k, v]) => [el("dt", {}, kbd(k)), el("dd", {text: v})]).flat());
  const filter = document.getElementById("filter");
  filter.value = localStorage.getItem("pipeline-review-filter") || "all";
  S.filter = filter.value;
  filter.addEventListener("change", () => { S.filter = filter.value; localStorage.setItem("pipeline-review-filter", S.filter); filter.blur(); });
  document.getElementById("prev-class").addEventListener("click", () => go(-1));
  document.getElementById("next-class").addEventListener("click", () => go(1));
  document.getElementById("toggle-reviewed").addEventListener("click", () => setClass("reviewed"));
  document.getElementById("toggle-problematic").addEventListener("click", () => setClass("problematic"));
  document.getElementById("jump-form").addEventListener("submit", (e) => { e.preventDefault(); jump(document.getElementById("jump").value); document.getElementById("jump").blur(); });
  onKeys(keys);
  // another tab may have marked images of this class: show them when this tab comes back
  document.addEventListener("visibilitychange", () => { if (!document.hidden && S.data) { load(S.data.wnid); refreshSummary(); } });
  const wanted = decodeURIComponent(location.hash.slice(1));
  const start = S.classes.find((c) => c.wnid === wanted) || S.classes.find(matches) || S.classes[0];
  await load(start.wnid);
  document.body.dataset.ready = "true";
}

main();
