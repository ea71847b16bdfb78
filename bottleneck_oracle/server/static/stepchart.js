// The chart of step times per rank: steps on x, wall ms on y, one series per rank, slow steps marked
// in red with a "slow" label. An SVG: a handful of points per rank, each a clickable element.

import { svg, fill } from "./dom.js";

export const RANK_COLORS = ["#4e79a7", "#f28e2b", "#59a14f", "#b07aa1", "#76b7b2", "#edc948", "#9c755f", "#ff9da7"];
const PAD = { left: 52, right: 16, top: 22, bottom: 30 };
const HEIGHT = 190;

/** The API's steps payload as series: rows per (step, rank), the steps, the ranks, the slow steps. */
export function stepSeries(payload) {
  const rows = (payload.steps || []).map((r) => ({
    step: Number(r.step), rank: Number(r.rank ?? r.slowest_rank ?? 0), wall_ms: Number(r.wall_ms),
    slow: Boolean(r.slow), partial: Boolean(r.partial),
  }));
  const slowList = payload.slow ?? payload.slow_steps ?? [];
  const slow = new Set(slowList.map((s) => Number(typeof s === "object" ? s.step : s)));
  for (const r of rows) if (r.slow) slow.add(r.step);
  const steps = [...new Set(rows.map((r) => r.step))].sort((a, b) => a - b);
  const ranks = [...new Set(rows.map((r) => r.rank))].sort((a, b) => a - b);
  return { rows, steps, ranks, slow };
}

function niceMax(v) {
  if (!(v > 0)) return 1;
  const p = 10 ** Math.floor(Math.log10(v));
  return [1, 2, 2.5, 5, 10].map((m) => m * p).find((m) => m >= v);
}

function axes(g, x, y, series, width, yMax) {
  for (let i = 0; i <= 4; i++) {
    const v = (yMax * i) / 4;
    g.appendChild(svg("line", { x1: PAD.left, x2: width - PAD.right, y1: y(v), y2: y(v), class: "grid" }));
    g.appendChild(svg("text", { x: PAD.left - 6, y: y(v) + 4, "text-anchor": "end", class: "tick" }, `${+v.toFixed(1)}`));
  }
  g.appendChild(svg("text", { x: 6, y: PAD.top - 8, class: "axis-label" }, "wall ms"));
  const every = Math.max(1, Math.ceil(series.steps.length / Math.max(1, (width - PAD.left) / 36)));
  series.steps.forEach((s, i) => {
    if (i % every) return;
    g.appendChild(svg("text", { x: x(i), y: HEIGHT - PAD.bottom + 16, "text-anchor": "middle", class: "tick" }, `${s}`));
  });
  g.appendChild(svg("text", { x: width - PAD.right, y: HEIGHT - 4, "text-anchor": "end", class: "axis-label" }, "step"));
}

function columns(g, x, series, selected, onPick, w) {
  series.steps.forEach((s, i) => {
    const col = svg("rect", { x: x(i) - w / 2, y: PAD.top, width: w, height: HEIGHT - PAD.top - PAD.bottom,
                              class: s === selected ? "col selected" : "col", "data-step": s, tabindex: 0 });
    col.appendChild(svg("title", {}, `step ${s}${series.slow.has(s) ? " (slow)" : ""}: open its timeline`));
    col.addEventListener("click", () => onPick(s));
    col.addEventListener("keydown", (e) => { if (e.key === "Enter") onPick(s); });
    g.appendChild(col);
  });
}

function lines(g, x, y, series, onPick) {
  const index = new Map(series.steps.map((s, i) => [s, i]));
  series.ranks.forEach((rank, ri) => {
    const color = RANK_COLORS[ri % RANK_COLORS.length];
    const pts = series.rows.filter((r) => r.rank === rank).sort((a, b) => a.step - b.step);
    g.appendChild(svg("polyline", { points: pts.map((r) => `${x(index.get(r.step))},${y(r.wall_ms)}`).join(" "),
                                    stroke: color, class: "series", "data-rank": rank }));
    for (const r of pts) {
      const dot = svg("circle", { cx: x(index.get(r.step)), cy: y(r.wall_ms), r: 3, fill: color, class: "pt",
                                  "data-step": r.step, "data-rank": rank });
      dot.appendChild(svg("title", {}, `step ${r.step}, rank ${rank}: ${r.wall_ms.toFixed(3)} ms${r.partial ? " (partial)" : ""}`));
      dot.addEventListener("click", () => onPick(r.step));
      g.appendChild(dot);
    }
  });
}

function slowMarks(g, x, y, series, onPick) {
  series.steps.forEach((s, i) => {
    if (!series.slow.has(s)) return;
    const of = series.rows.filter((r) => r.step === s);
    const worst = of.reduce((a, b) => (b.wall_ms > a.wall_ms ? b : a), of[0]);
    const mark = svg("g", { class: "slow", "data-slow-step": s, "data-testid": "slow-step" });
    for (const r of of.filter((r) => r.slow || r === worst)) {
      mark.appendChild(svg("circle", { cx: x(i), cy: y(r.wall_ms), r: 6, class: "slow-dot", "data-rank": r.rank }));
    }
    mark.appendChild(svg("text", { x: x(i), y: y(worst.wall_ms) - 10, "text-anchor": "middle", class: "slow-label" }, "slow"));
    mark.appendChild(svg("title", {}, `step ${s} is slow: ${worst.wall_ms.toFixed(3)} ms on rank ${worst.rank}`));
    mark.addEventListener("click", () => onPick(s));
    g.appendChild(mark);
  });
}

function legend(g, series, width) {
  series.ranks.forEach((rank, ri) => {
    const lx = width - PAD.right - (series.ranks.length - ri) * 58;
    g.appendChild(svg("rect", { x: lx, y: 4, width: 10, height: 10, fill: RANK_COLORS[ri % RANK_COLORS.length] }));
    g.appendChild(svg("text", { x: lx + 14, y: 13, class: "tick" }, `rank ${rank}`));
  });
}

/** Draws `series` into the <svg> `node`, `selected` step highlighted; a click on a step calls onPick(step). */
export function drawStepChart(node, series, selected, onPick) {
  const width = Math.max(320, node.parentElement.clientWidth || 800);
  node.setAttribute("viewBox", `0 0 ${width} ${HEIGHT}`);
  node.setAttribute("width", width);
  node.setAttribute("height", HEIGHT);
  const g = svg("g");
  fill(node, g);
  if (!series.steps.length) return;
  const yMax = niceMax(Math.max(...series.rows.map((r) => r.wall_ms)) * 1.12);
  const n = series.steps.length;
  const plotW = width - PAD.left - PAD.right;
  const x = (i) => PAD.left + (n === 1 ? plotW / 2 : (plotW * (i + 0.5)) / n);
  const y = (v) => HEIGHT - PAD.bottom - ((HEIGHT - PAD.top - PAD.bottom) * v) / yMax;
  axes(g, x, y, series, width, yMax);
  columns(g, x, series, selected, onPick, plotW / n);
  lines(g, x, y, series, onPick);
  slowMarks(g, x, y, series, onPick);
  legend(g, series, width);
}
