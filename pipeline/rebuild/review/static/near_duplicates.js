// The near-duplicate page: each candidate beside its nearest neighbours per measure; confirm or reject each pair.
import {api, el, ensureReviewer, formatDistance, imageUrl, kbd, onKeys, reviewerName, toast} from "./common.js";

const S = {list: [], thresholds: {}, current: null, detail: null, focus: 0, onlyUnfinished: false};
const METRIC_NAMES = {l2: "pixels (l2)", fc7: "VGG-16 fc7 features", dssim: "DSSIM"};

function visible() {
  return S.list.filter((c) => !S.onlyUnfinished || !c.sufficient || c.candidate_id === S.current);
}

async function refreshList() {
  const data = await api("/api/near-duplicates");
  S.list = data.candidates;
  S.thresholds = data.thresholds;
  const pending = S.list.filter((c) => !c.sufficient).length;
  document.getElementById("nd-progress").textContent =
    `${pending} of ${S.list.length} candidates still not sufficiently reviewed`;
  document.getElementById("nd-candidates").replaceChildren(...visible().map((c) => el("li", {
    class: `${c.sufficient ? "done" : "pending"}${c.candidate_id === S.current ? " current" : ""}`,
    "data-id": c.candidate_id, onclick: () => show(c.candidate_id),
    title: Object.entries(c.status).map(([m, s]) => `${m}: ${s.sufficient ? "done" : `${s.unreviewed_below_threshold} to review`}`).join("\n"),
  }, el("span", {class: "dot"}), el("code", {text: c.candidate_id.slice(0, 12)}), c.in_revision ? el("span", {class: "badge", text: "in revision"}) : null)));
}

function pairs() {
  const out = [];
  for (const [metric, block] of Object.entries(S.detail.metrics)) {
    for (const n of block.neighbours) out.push({metric, ...n});
  }
  return out;
}

function neighbourCard(n, index) {
  const state = n.decision || (n.below_threshold ? "pending" : "far");
  return el("article", {class: `nd-card ${state}${index === S.focus ? " focused" : ""}`, "data-reference": n.reference_id, "data-metric": n.metric,
    onclick: () => focus(index)},
  el("div", {class: "frame"}, n.available ? el("img", {src: imageUrl("reference", n.reference_id), alt: n.reference_id, loading: "lazy"})
    : el("div", {class: "missing", text: "no image: pass --references"})),
  el("div", {class: "nd-meta"},
    el("span", {class: "distance", text: formatDistance(n.distance)}), el("span", {class: "muted", text: ` #${n.rank} · ${n.source}`})),
  el("div", {class: "ref-id", title: n.reference_id, text: n.reference_id}),
  el("div", {class: "decision", text: n.decision ? n.decision : (n.below_threshold ? "to review" : "above threshold")}),
  el("div", {class: "pair-buttons"},
    el("button", {class: "confirm", onclick: (e) => { e.stopPropagation(); decide(index, "confirm"); }}, "duplicate ", kbd("y")),
    el("button", {class: "reject", onclick: (e) => { e.stopPropagation(); decide(index, "reject"); }}, "different ", kbd("x")),
    n.decision ? el("button", {class: "undo", onclick: (e) => { e.stopPropagation(); decide(index, "undo"); }}, "undo ", kbd("z")) : null));
}

function render() {
  const d = S.detail;
  const meta = d.metadata || {};
  document.getElementById("nd-candidate").replaceChildren(
    el("div", {class: "frame big"}, el("img", {src: imageUrl("candidate", d.candidate_id), alt: d.candidate_id})),
    el("div", {},
      el("h1", {text: "Candidate"}), el("code", {text: d.candidate_id}),
      el("p", {class: "muted", text: [d.class_name && `${d.class_name} (${meta.wnid})`, meta.search_key && `query “${meta.search_key}”`, meta.selection_frequency !== undefined && `selection frequency ${meta.selection_frequency}`].filter(Boolean).join(" · ")}),
      el("ul", {class: "status"}, Object.entries(d.status).map(([m, s]) => el("li", {class: s.sufficient ? "done" : "pending",
        text: `${METRIC_NAMES[m] || m}: ${s.sufficient ? "sufficiently reviewed" : `${s.unreviewed_below_threshold} neighbour(s) under the threshold to review`}`}))),
      el("button", {id: "next-unfinished", onclick: () => next(true)}, "next not yet reviewed ", kbd("]"))));
  let index = 0;
  document.getElementById("nd-metrics").replaceChildren(...Object.entries(d.metrics).map(([metric, block]) => el("section", {class: "metric"},
    el("h2", {}, METRIC_NAMES[metric] || metric, el("span", {class: "muted", text: ` threshold ${formatDistance(block.threshold)} · nearest first`})),
    el("div", {class: "nd-row"}, block.neighbours.map((n) => neighbourCard({metric, ...n}, index++))))));
}

async function show(candidateId) {
  S.current = candidateId;
  S.detail = await api(`/api/near-duplicates/${encodeURIComponent(candidateId)}`);
  const all = pairs();
  const firstPending = all.findIndex((n) => n.below_threshold && !n.decision);
  S.focus = firstPending >= 0 ? firstPending : 0;
  if (location.hash !== `#${candidateId}`) history.replaceState(null, "", `#${candidateId}`);
  render();
  await refreshList();
}

function focus(index) {
  const count = pairs().length;
  if (!count) return;
  S.focus = Math.max(0, Math.min(count - 1, index));
  document.querySelectorAll(".nd-card").forEach((node, k) => node.classList.toggle("focused", k === S.focus));
}

async function decide(index, decision) {
  const pair = pairs()[index];
  if (!pair) return;
  await api("/api/pair", {candidate_id: S.current, reference_id: pair.reference_id, metric: pair.metric, decision, reviewer: reviewerName()});
  toast(`${pair.reference_id}: ${decision === "confirm" ? "near-duplicate" : decision === "reject" ? "not a duplicate" : "undone"}`);
  const wasPending = S.list.find((c) => c.candidate_id === S.current);
  await show(S.current);
  const now = S.list.find((c) => c.candidate_id === S.current);
  if (decision !== "undo" && now && now.sufficient && wasPending && !wasPending.sufficient) {
    toast("sufficiently reviewed: on to the next candidate");
    next(true);
  }
}

function next(unfinishedOnly, step = 1) {
  const list = S.list;
  const at = list.findIndex((c) => c.candidate_id === S.current);
  for (let k = 1; k <= list.length; k++) {
    const c = list[(at + step * k + list.length * k) % list.length];
    if (c.candidate_id !== S.current && (!unfinishedOnly || !c.sufficient)) { show(c.candidate_id); return; }
  }
  toast(unfinishedOnly ? "every candidate is sufficiently reviewed" : "no other candidate");
}

const SHORTCUTS = [["← →", "previous / next neighbour"], ["y", "confirm: near-duplicate"], ["x", "reject: not a duplicate"],
  ["z", "undo the decision"], ["X (shift)", "reject every remaining neighbour under the threshold"],
  ["]", "next candidate not yet sufficiently reviewed"], [", .", "previous / next candidate"]];

function keys(event) {
  const key = event.key;
  if (!S.detail) return false;
  if (key === "ArrowRight") { focus(S.focus + 1); return true; }
  if (key === "ArrowLeft") { focus(S.focus - 1); return true; }
  if (key === "y") { decide(S.focus, "confirm"); return true; }
  if (key === "x") { decide(S.focus, "reject"); return true; }
  if (key === "z") { decide(S.focus, "undo"); return true; }
  if (key === "X") { rejectRest(); return true; }
  if (key === "]") { next(true); return true; }
  if (key === ".") { next(false, 1); return true; }
  if (key === ",") { next(false, -1); return true; }
  return false;
}

async function rejectRest() {
  const seen = new Set();
  for (const pair of pairs()) {
    if (pair.below_threshold && !pair.decision && !seen.has(pair.reference_id)) {
      seen.add(pair.reference_id);
      await api("/api/pair", {candidate_id: S.current, reference_id: pair.reference_id, metric: pair.metric, decision: "reject", reviewer: reviewerName()});
    }
  }
  await show(S.current);
}

async function main() {
  await ensureReviewer();
  const session = await api("/api/session");
  document.getElementById("revision").textContent = `${session.revision} (${session.rule})`;
  document.getElementById("shortcuts").replaceChildren(...SHORTCUTS.map(([k, v]) => [el("dt", {}, kbd(k)), el("dd", {text: v})]).flat());
  const only = document.getElementById("only-unfinished");
  only.addEventListener("change", () => { S.onlyUnfinished = only.checked; refreshList(); });
  onKeys(keys);
  if (!session.near_duplicates) {
    const empty = document.getElementById("nd-empty");
    empty.textContent = "No near-duplicate search was given: start the review with --near-duplicates DIR (the output of `python -m pipeline near-duplicates`).";
    empty.hidden = false;
    document.body.dataset.ready = "true";
    return;
  }
  await refreshList();
  const wanted = decodeURIComponent(location.hash.slice(1));
  const start = S.list.find((c) => c.candidate_id === wanted) || S.list.find((c) => !c.sufficient) || S.list[0];
  if (start) await show(start.candidate_id);
  else { const empty = document.getElementById("nd-empty"); empty.textContent = "No candidate has a neighbour under a review threshold."; empty.hidden = false; }
  document.body.dataset.ready = "true";
}

main();
