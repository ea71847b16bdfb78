// The GPU utilization strip above the timeline: one bar per rank over the step's span, dark where the
// rank's GPU was busy (the union of its kernels, copies and fills), light where it sat idle, with the
// busy share beside it. Built from the timeline payload's `gpu` list; every string is text.

import { el, fill, ms, svg } from "./dom.js";

function bar(g, span) {
  const width = Math.max(span, 1e-9);
  const node = svg("svg", { class: "gpu-bar", viewBox: `0 0 ${width} 1`, preserveAspectRatio: "none",
                            role: "img", "aria-label": `rank ${g.rank} GPU busy intervals` },
    svg("title", {}, `rank ${g.rank}: busy ${ms(g.busy_ms)}, idle ${ms(g.idle_ms)}; computation ` +
                     `${ms(g.computation_ms)}, communication ${ms(g.comm_ms)} (exposed ${ms(g.exposed_comm_ms)}), ` +
                     `memcpy ${ms(g.memcpy_ms)}`),
    svg("rect", { class: "gpu-window", x: g.start_ms, y: 0, width: Math.max(g.end_ms - g.start_ms, 0), height: 1 }));
  for (const [s, e] of g.busy) node.appendChild(svg("rect", { class: "gpu-busy", x: s, y: 0, width: e - s, height: 1 }));
  return node;
}

/** Draws the strip of a timeline payload into `root` (a div); says so when the trace has no GPU events. */
export function drawGpuStrip(root, payload) {
  const gpu = payload.gpu || [];
  root.dataset.ranks = String(gpu.length);
  if (!gpu.length) {
    fill(root, el("p", { class: "hint gpu-none" }, "No GPU events in this trace: no GPU utilization to show."));
    return;
  }
  fill(root, ...gpu.map((g) => el("div", { class: "gpu-row", "data-rank": g.rank, "data-busy-pct": g.busy_pct,
                                           "data-busy-ms": g.busy_ms, "data-intervals": g.busy.length },
    el("span", { class: "gpu-label" }, `rank ${g.rank} GPU ${g.busy_pct}% busy`), bar(g, payload.span_ms))));
}
