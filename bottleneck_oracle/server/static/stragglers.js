// The pipeline stragglers view: upload a pipeline job's op table (trace.parquet or .csv, with its meta.yaml or its
// DP and PP sizes) and what-if edits to POST api/stragglers, the JSON of `oracle stragglers --json`, and show its
// headline, its fixes and what-ifs, and the heatmap of each worker's slowdown: DP ranks across, stages down, the
// hottest worker red. Everything from the upload or the report is written as text (dom.js).

import { el, fill } from "./dom.js";
import { uploadFiles } from "./upload.js";

const $ = (id) => document.getElementById(id);
const HEAD = { none: "No stragglers", slow_worker: "Slow worker", stage_imbalance: "Stage imbalance",
               uneven_microbatches: "Uneven work", unexplained: "Slow" };
const COOL = [255, 255, 255];  // a worker at (or under) its ideal
const HOT = [214, 39, 40];  // the hottest worker of the job (style.css --slow)

/** The colour of a slowdown: white at 1 and below, red at the job's hottest. */
export function heatColor(value, hottest) {
  const t = hottest > 1 ? Math.min(1, Math.max(0, (value - 1) / (hottest - 1))) : 0;
  const [r, g, b] = COOL.map((c, i) => Math.round(c + (HOT[i] - c) * t));
  return `rgb(${r}, ${g}, ${b})`;
}

/** The heatmap as rows of cells: one row per stage, one cell per DP rank (values[dp][stage]). */
export function heatRows(heatmap) {
  const values = heatmap.values;
  const stages = values.length ? values[0].length : 0;
  const hottest = Math.max(1, ...values.flat());
  return Array.from({ length: stages }, (_, stage) => values.map((byStage, dp) => ({
    dp, stage, value: byStage[stage], color: heatColor(byStage[stage], hottest),
    hottest: byStage[stage] === hottest && hottest > 1,
  })));
}

const secs = (x) => Number(x).toFixed(3);

function predicted(p) {
  const [lo, hi] = p.interval_s;
  const change = p.saving_s >= 0 ? `saving ${secs(p.saving_s)} s` : `costing ${secs(-p.saving_s)} s`;
  return `a step of ${secs(p.predicted_step_s)} s (interval ${secs(lo)} to ${secs(hi)} s), ${change} (${p.saving_pct}%)`;
}

function heatTable(heatmap) {
  const rows = heatRows(heatmap);
  const dps = heatmap.values.map((_, dp) => el("th", { scope: "col" }, String(dp)));
  const table = el("table", { id: "stragglers-heat", "data-testid": "stragglers-heat" },
    el("caption", {}, "slowdown S per worker: DP rank across, stage down; white at 1, red at the slowest"),
    el("tr", {}, el("th", { class: "corner" }, "stage \\ dp"), ...dps),
    ...rows.map((cells, stage) => el("tr", { "data-stage": stage }, el("th", { scope: "row" }, String(stage)),
      ...cells.map((c) => {
        const td = el("td", { "data-dp": c.dp, "data-value": c.value, class: c.hottest ? "hottest" : null,
                              title: `dp_rank ${c.dp}, stage ${c.stage}: S ${c.value}` }, c.value.toFixed(3));
        td.style.backgroundColor = c.color;  // CSSOM, allowed by the page's style-src
        return td;
      }))));
  return el("div", { class: "heat-wrap" }, table);
}

function render(r) {
  const job = r.job;
  const lines = [
    el("p", { id: "stragglers-headline", "data-cause": r.cause }, el("strong", {}, `${HEAD[r.cause] || r.cause}: `),
       r.headline),
    el("p", { class: "hint", id: "stragglers-job" }, `job ${job.name || job.source}: DP ${job.dp_size} × PP ${job.pp_size}`
       + ` × TP ${job.tp_size} = ${job.world_size} workers, ${job.steps.length} steps; S = ${Number(r.slowdown).toFixed(3)}`),
    ...r.explanation.map((t) => el("p", { class: "hint" }, t)),
  ];
  if (r.fixes.length) {
    lines.push(el("ol", { id: "stragglers-fixes" }, ...r.fixes.map((f) => el("li", { "data-cause": f.cause },
      el("strong", {}, "Fix: "), `${f.action}: ${predicted(f)}`))));
  }
  if (r.whatif.length) {
    lines.push(el("ul", { id: "stragglers-whatifs" }, ...r.whatif.map((w) => el("li", {},
      el("strong", {}, "What if "), `${w.edits.join("; ")}: ${predicted(w)}`))));
  }
  lines.push(heatTable(r.heatmap));
  fill($("stragglers-result"), ...lines);
  $("stragglers-result").dataset.state = "done";
}

function upload(ev) {
  ev.preventDefault();
  uploadFiles("stragglers", "api/stragglers", "choose the op table first (trace.parquet or .csv, and its meta.yaml)",
    render, (form) => {
      for (const key of ["dp", "pp"]) {
        const value = $(`stragglers-${key}`).value.trim();
        if (value) form.append(key, value);
      }
      for (const edit of $("stragglers-whatif").value.split("\n").map((t) => t.trim()).filter(Boolean)) {
        form.append("whatif", edit);
      }
    });
}

$("stragglers-form")?.addEventListener("submit", upload);
