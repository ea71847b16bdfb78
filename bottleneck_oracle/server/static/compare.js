// The comparison view: pick BASE and NEW among the loaded traces, and GET api/diff (the JSON of
// `oracle diff --format json`): the verdict, how comparable the runs are, the steady steps of both
// runs on one chart, what moved, and the edit that takes the slower run to the faster one. Trace
// strings (names, op names, reasons) are only ever written as text (dom.js).

import { getJSON } from "./api.js";
import { el, fill, ms, svg } from "./dom.js";

const $ = (id) => document.getElementById(id);
const COLORS = { base: "#4e79a7", new: "#f28e2b" };
const PAD = { left: 52, right: 16, top: 22, bottom: 30 };
const HEIGHT = 190;
const ROWS = 5;  // movers of each kind, as `oracle diff` prints them
const SECTIONS = [["categories", "category", "attribution"], ["ops", "op", "op"],
                  ["critical_path", "op", "critical path"], ["gpu", "field", "GPU"]];

/** Refills both pickers from api/traces, keeping what was chosen. */
async function loadPickers() {
  const { traces } = await getJSON("api/traces");
  for (const id of ["diff-base", "diff-new"]) {
    const picker = $(id);
    const chosen = picker.value;
    fill(picker, el("option", { value: "" }, id === "diff-base" ? "BASE…" : "NEW…"),
         ...traces.map((t) => el("option", { value: t.id }, `${t.name} · ${t.ranks} ranks`)));
    if (traces.some((t) => t.id === chosen)) picker.value = chosen;
  }
}

function signed(v) {
  return `${v > 0 ? "+" : ""}${Number(v).toFixed(3)}`;
}

/** The two runs' steady step times, by position (steps on x, ms on y), one line each. */
function drawChart(node, diff) {
  const runs = ["base", "new"].map((key) => ({ key, steps: diff[key].steady, ms: diff[key].steady_ms }));
  const width = Math.max(320, node.parentElement.clientWidth || 600);
  const n = Math.max(1, ...runs.map((r) => r.ms.length));
  const yMax = Math.max(1e-3, ...runs.flatMap((r) => r.ms)) * 1.1;
  const x = (i) => PAD.left + (n > 1 ? (i * (width - PAD.left - PAD.right)) / (n - 1) : (width - PAD.left - PAD.right) / 2);
  const y = (v) => HEIGHT - PAD.bottom - (v / yMax) * (HEIGHT - PAD.top - PAD.bottom);
  node.setAttribute("width", width);
  node.setAttribute("height", HEIGHT);
  fill(node);
  for (let i = 0; i <= 4; i++) {
    const v = (yMax * i) / 4;
    node.appendChild(svg("line", { x1: PAD.left, x2: width - PAD.right, y1: y(v), y2: y(v), class: "grid" }));
    node.appendChild(svg("text", { x: PAD.left - 6, y: y(v) + 4, "text-anchor": "end", class: "tick" }, `${+v.toFixed(1)}`));
  }
  node.appendChild(svg("text", { x: 6, y: PAD.top - 8, class: "axis-label" }, "steady step ms"));
  node.appendChild(svg("text", { x: width - PAD.right, y: HEIGHT - 6, "text-anchor": "end", class: "axis-label" },
                       "steady steps, in order"));
  for (const run of runs) {
    const points = run.ms.map((v, i) => `${x(i)},${y(v)}`).join(" ");
    node.appendChild(svg("polyline", { points, class: "series", stroke: COLORS[run.key] }));
    run.ms.forEach((v, i) => node.appendChild(svg("circle", {
      cx: x(i), cy: y(v), r: 3.5, fill: COLORS[run.key], class: "pt", "data-run": run.key,
      "data-step": run.steps[i], "data-ms": v }, svg("title", {}, `${run.key.toUpperCase()} step ${run.steps[i]}: ${ms(v)}`))));
    const median = diff[run.key].median_ms;
    if (median !== null) {
      node.appendChild(svg("line", { x1: PAD.left, x2: width - PAD.right, y1: y(median), y2: y(median),
                                     class: "median", stroke: COLORS[run.key] }));
    }
  }
}

function moverRows(moved) {
  const rows = [];
  for (const [key, label, what] of SECTIONS) {
    for (const r of (moved[key] || []).slice(0, ROWS)) rows.push([what, String(r[label]), r.base_ms, r.new_ms, r.delta_ms]);
  }
  for (const f of (moved.findings || []).slice(0, ROWS)) {
    rows.push([`finding (${f.change})`, `${f.category} on rank(s) ${f.ranks.join(",") || "all"}`, f.base_ms, f.new_ms, f.delta_ms]);
  }
  for (const r of (moved.ranks || []).slice(0, ROWS)) rows.push(["rank", `rank ${r.rank}`, r.base_ms, r.new_ms, r.delta_ms]);
  return rows;
}

function whatifLine(doc) {
  const w = doc.whatif;
  if (!w) return null;
  const slow = doc[`${w.applied_to}_trace`].name;
  const fast = doc[`${w.predicts}_trace`].name;
  return `What-if: \`${w.edit}\` applied to ${w.applied_to.toUpperCase()} (${slow}) predicts ${ms(w.predicted_ms)} a step `
       + `against ${ms(w.target_ms)} measured for ${w.predicts.toUpperCase()} (${fast}): ${w.error_pct > 0 ? "+" : ""}${w.error_pct}%`;
}

function render(doc) {
  const c = doc.comparability;
  $("diff-verdict").dataset.verdict = doc.verdict;
  fill($("diff-verdict"), el("strong", {}, doc.headline), el("br"),
       `BASE ${doc.base_trace.name} → NEW ${doc.new_trace.name} · comparability ${c.level}`
       + (c.reasons.length ? ` (${c.reasons.join("; ")})` : ""),
       doc.cause ? el("br") : null, doc.cause ? `Cause: ${doc.cause.words}` : null,
       doc.whatif ? el("br") : null, whatifLine(doc),
       ...["base", "new"].flatMap((k) => doc[`${k}_verdict`]
         ? [el("br"), `${k.toUpperCase()} ${doc[`${k}_trace`].name}: ${doc[`${k}_verdict`].headline}`] : []));
  fill($("diff-legend"), ...["base", "new"].map((k) => el("span", { class: "key" },
    el("span", { class: `swatch run-${k}` }), `${k.toUpperCase()} ${doc[`${k}_trace`].name}`)));
  drawChart($("diff-chart"), doc);
  const table = el("table", {}, el("tr", {}, ...["what", "name", "base", "new", "change"].map((h) => el("th", {}, h))));
  for (const [what, name, a, b, d] of moverRows(doc.moved)) {
    table.appendChild(el("tr", { "data-what": what }, el("td", {}, what), el("td", { class: "name" }, name),
                         el("td", { class: "num" }, ms(a)), el("td", { class: "num" }, ms(b)),
                         el("td", { class: "num" }, `${signed(d)} ms`)));
  }
  fill($("diff-movers"), table);
}

async function compare(ev) {
  ev.preventDefault();
  const base = $("diff-base").value;
  const next = $("diff-new").value;
  const out = $("diff-result");
  $("diff-error").textContent = "";
  if (!base || !next) { $("diff-error").textContent = "choose BASE and NEW first"; return; }
  out.dataset.state = "running";
  $("diff-run").disabled = true;
  try {
    render(await getJSON(`api/diff?base=${encodeURIComponent(base)}&new=${encodeURIComponent(next)}`));
    out.dataset.state = "done";
  } catch (err) {
    $("diff-error").textContent = String(err.message || err).split("\n")[0];
    out.dataset.state = "error";
  } finally {
    $("diff-run").disabled = false;
  }
}

function showError(err) {
  $("diff-error").textContent = String(err.message || err).split("\n")[0];
}

$("diff-form").addEventListener("submit", (ev) => compare(ev).catch(showError));
for (const id of ["diff-base", "diff-new"]) $(id).addEventListener("focus", () => loadPickers().catch(showError));
loadPickers().then(() => { $("diff-form").dataset.ready = "1"; }).catch(showError);
