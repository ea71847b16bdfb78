// The step timeline on a <canvas>: a lane per rank and thread/stream, events as rectangles coloured by
// category, the critical path bright and outlined (the rest dimmed), a what-if's new critical path
// overlaid. Fast on tens of thousands of events: a frame visits only the visible rows and, by binary
// search in each row's start times (timeline_model.js), the events in the visible time range;
// events narrower than a pixel merge into one pixel column, rectangles of one colour are filled as
// one path, and redraws are coalesced into requestAnimationFrame.

import { el, fill, ms } from "./dom.js";
import { LANE_GAP, ROW_H, buildModel, lowerBound } from "./timeline_model.js";

const AXIS_H = 22;
const GUTTER = 176;
const MAX_HEIGHT = 560;
const LABEL_MIN_PX = 44;
const DIM_ALPHA = 0.28;
export const CATEGORY_COLORS = {
  gpu_compute: "#4e79a7", communication: "#e15759", cpu: "#59a14f", launch_overhead: "#f28e2b",
  sync_wait: "#b07aa1", data_loading: "#edc948", idle: "#bab0ac",
};
const EXTRA_COLORS = ["#76b7b2", "#ff9da7", "#9c755f", "#8cd17d", "#d4a6c8", "#86bcb6"];
const OLD_PATH = "#d4a000";
const NEW_PATH = "#d6249f";

export function colorOf(category, i) {
  return CATEGORY_COLORS[category] || EXTRA_COLORS[i % EXTRA_COLORS.length];
}

function niceStep(raw) {
  const p = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 5, 10].map((m) => m * p).find((m) => m >= raw);
}

/** The interactive timeline of one step in `canvas`, its tooltip in `tooltip`. */
export class Timeline {
  constructor(canvas, tooltip) {
    this.canvas = canvas;
    this.tooltip = tooltip;
    this.ctx = canvas.getContext("2d", { alpha: false });
    this.model = null;
    this.newCrit = null;
    this.newPath = [];
    this.view = { t0: 0, t1: 1, y0: 0 };
    this.pending = false;
    this.firstDraw = null;
    this.buckets = new Map();
    this.onFirstDraw = null;
    this.bindInput();
    new ResizeObserver(() => this.resize()).observe(canvas.parentElement);
  }

  /** Shows a step: the API's timeline payload. The first frame is drawn at the next animation frame. */
  show(payload, onFirstDraw) {
    this.model = buildModel(payload);
    this.newCrit = null;
    this.newPath = [];
    this.onFirstDraw = onFirstDraw || null;
    this.canvas.dataset.rendered = "0";
    this.canvas.dataset.step = String(payload.step);
    this.hideTooltip();
    this.resize(false);
    this.resetView();
  }

  /** Overlays a what-if's critical path (graph node ids, in path order) on the step's own. */
  overlay(nodeIds) {
    if (!this.model) return;
    const m = this.model;
    this.newCrit = new Uint8Array(m.events.length);
    this.newPath = (nodeIds || []).map((id) => m.idIndex.get(id)).filter((i) => i !== undefined);
    for (const i of this.newPath) this.newCrit[i] = 1;
    this.canvas.dataset.overlay = String(this.newPath.length);
    this.schedule();
  }

  /** The whole step, scrolled down to the critical path's topmost lane when that lies below the fold. */
  resetView() {
    const m = this.model;
    if (!m) return;
    const pad = m.span * 0.01;
    let top = Infinity;
    for (const e of m.path) if (m.row[e] >= 0) top = Math.min(top, m.lanes[m.rows[m.row[e]].lane].y);
    const room = this.height - AXIS_H;
    const maxY = Math.max(0, m.height - room);
    const y0 = top === Infinity || top + 3 * ROW_H < room ? 0 : Math.min(maxY, Math.max(0, top - ROW_H));
    this.view = { t0: -pad, t1: m.span + pad, y0 };
    this.schedule();
  }

  resize(redraw = true) {
    const c = this.canvas;
    const width = Math.max(300, c.parentElement.clientWidth);
    const height = Math.min(MAX_HEIGHT, AXIS_H + (this.model ? this.model.height : 120) + 4);
    const dpr = window.devicePixelRatio || 1;
    this.width = width;
    this.height = height;
    c.style.width = `${width}px`;
    c.style.height = `${height}px`;
    c.width = Math.round(width * dpr);
    c.height = Math.round(height * dpr);
    this.dpr = dpr;
    if (redraw) this.schedule();
  }

  schedule() {
    if (this.pending) return;
    this.pending = true;
    requestAnimationFrame(() => { this.pending = false; this.draw(); });
  }

  scale() {
    return (this.width - GUTTER) / (this.view.t1 - this.view.t0);
  }

  /** One frame; returns its stats ({events, critical, ms}) and marks the first frame of a step. */
  draw() {
    const t = performance.now();
    const { ctx } = this;
    ctx.setTransform(this.dpr, 0, 0, this.dpr, 0, 0);
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, this.width, this.height);
    if (!this.model) return null;
    const stats = this.drawEvents();
    this.drawPaths();
    this.drawGutter();
    this.drawAxis();
    stats.ms = performance.now() - t;
    this.publish(stats);
    return stats;
  }

  publish(stats) {
    const d = this.canvas.dataset;
    d.eventsDrawn = String(stats.events);
    d.criticalDrawn = String(stats.critical);
    d.newCriticalDrawn = String(stats.newCritical);
    d.lastFrameMs = stats.ms.toFixed(2);
    if (d.rendered !== "1") {
      d.rendered = "1";
      performance.mark("timeline-rendered", { detail: { step: this.model.payload.step } });
      this.firstDraw = stats;
      window.oracleRendered = { step: this.model.payload.step, events: stats.events, critical: stats.critical,
                                frameMs: stats.ms };
      if (this.onFirstDraw) this.onFirstDraw(stats);
    }
  }

  bucket(key) {
    let b = this.buckets.get(key);
    if (!b) { b = []; this.buckets.set(key, b); }
    return b;
  }

  /** Collects the visible rectangles of one row into colour buckets, merging sub-pixel events. */
  collectRow(r, y, k, stats) {
    const m = this.model;
    const { t0, t1 } = this.view;
    const ids = r.ids;
    let i = lowerBound(r.starts, t0 - r.maxDur, 0, ids.length);
    let lastPx = -Infinity;
    for (; i < ids.length; i++) {
      const e = ids[i];
      const s = m.start[e];
      if (s > t1) break;
      if (m.end[e] < t0) continue;
      let x0 = GUTTER + (s - t0) * k;
      let x1 = GUTTER + (m.end[e] - t0) * k;
      const critical = m.crit[e] === 1;
      const fresh = this.newCrit !== null && this.newCrit[e] === 1;
      if (x1 - x0 < 1) {
        x0 = Math.floor(x0);
        if (x0 < lastPx && !critical && !fresh) continue;  // this pixel is drawn already
        x1 = x0 + 1;
      }
      x0 = Math.max(x0, GUTTER);
      x1 = Math.min(x1, this.width);
      lastPx = Math.max(lastPx, x1);
      this.bucket(`${m.cat[e]}:${critical ? 1 : 0}`).push(x0, y, x1 - x0, ROW_H - 1);
      stats.events++;
      if (critical) { stats.critical++; this.bucket("crit").push(x0, y, x1 - x0, ROW_H - 1); }
      if (fresh) { stats.newCritical++; this.bucket("new").push(x0, y, x1 - x0, ROW_H - 1); }
      if (x1 - x0 >= LABEL_MIN_PX) this.bucket("labels").push(e, x0, y, x1 - x0);
    }
  }

  drawEvents() {
    const m = this.model;
    const { ctx } = this;
    const k = this.scale();
    const stats = { events: 0, critical: 0, newCritical: 0 };
    for (const b of this.buckets.values()) b.length = 0;
    for (const r of m.rows) {
      const y = AXIS_H + r.y - this.view.y0;
      if (y + ROW_H < AXIS_H || y > this.height) continue;
      this.collectRow(r, y, k, stats);
    }
    ctx.save();
    ctx.beginPath();
    ctx.rect(GUTTER, AXIS_H, this.width - GUTTER, this.height - AXIS_H);
    ctx.clip();
    for (const pass of [0, 1]) {  // the dimmed rest first, the critical path over it
      m.categories.forEach((category, ci) => {
        const rects = this.buckets.get(`${ci}:${pass}`);
        if (!rects || !rects.length) return;
        ctx.globalAlpha = m.hasCritical && !pass ? DIM_ALPHA : 1;
        ctx.fillStyle = colorOf(category, ci);
        this.fillRects(rects);
      });
    }
    ctx.globalAlpha = 1;
    this.strokeRects(this.buckets.get("crit"), "#1a1a1a", 1, []);
    this.strips(this.buckets.get("crit"), OLD_PATH, 0);
    this.strokeRects(this.buckets.get("new"), NEW_PATH, 2, [4, 2]);
    this.strips(this.buckets.get("new"), NEW_PATH, ROW_H - 4);
    this.drawLabels(this.buckets.get("labels"));
    ctx.restore();
    return stats;
  }

  fillRects(rects) {
    const { ctx } = this;
    ctx.beginPath();
    for (let j = 0; j < rects.length; j += 4) ctx.rect(rects[j], rects[j + 1], rects[j + 2], rects[j + 3]);
    ctx.fill();
  }

  strokeRects(rects, color, width, dash) {
    if (!rects || !rects.length) return;
    const { ctx } = this;
    ctx.strokeStyle = color;
    ctx.lineWidth = width;
    ctx.setLineDash(dash);
    ctx.beginPath();
    for (let j = 0; j < rects.length; j += 4) {
      if (rects[j + 2] >= 3) ctx.rect(rects[j] + 0.5, rects[j + 1] + 0.5, rects[j + 2] - 1, rects[j + 3] - 1);
    }
    ctx.stroke();
    ctx.setLineDash([]);
  }

  /** A 3 px band along each rectangle of a path (at offset dy): the path reads even where events are thin. */
  strips(rects, color, dy) {
    if (!rects || !rects.length) return;
    const { ctx } = this;
    ctx.fillStyle = color;
    ctx.beginPath();
    for (let j = 0; j < rects.length; j += 4) ctx.rect(rects[j], rects[j + 1] + dy, rects[j + 2], 3);
    ctx.fill();
  }

  drawLabels(labels) {
    if (!labels || !labels.length) return;
    const { ctx } = this;
    ctx.font = "10px system-ui, sans-serif";
    ctx.fillStyle = "#111";
    ctx.textBaseline = "middle";
    const charW = ctx.measureText("abcdefghijklmnopqrstuvwxyz").width / 26 || 6;
    for (let j = 0; j < labels.length; j += 4) {
      const name = String(this.model.events[labels[j]].name);
      const room = Math.floor((labels[j + 3] - 6) / charW);
      if (room < 3) continue;
      const text = name.length > room ? `${name.slice(0, room - 1)}…` : name;
      ctx.fillText(text, Math.max(labels[j + 1], GUTTER) + 3, labels[j + 2] + ROW_H / 2);
    }
  }

  /** The critical path as a line through its events in path order: the step's own, then the what-if's. */
  drawPaths() {
    const { ctx } = this;
    ctx.save();
    ctx.beginPath();
    ctx.rect(GUTTER, AXIS_H, this.width - GUTTER, this.height - AXIS_H);
    ctx.clip();
    this.pathLine(this.model.path, OLD_PATH, 2, []);
    this.pathLine(this.newPath, NEW_PATH, 2, [6, 3]);
    ctx.restore();
  }

  pathLine(path, color, width, dash) {
    if (!path.length) return;
    const m = this.model;
    const { ctx } = this;
    const k = this.scale();
    ctx.strokeStyle = color;
    ctx.lineWidth = width;
    ctx.setLineDash(dash);
    ctx.beginPath();
    let prev = -1;
    for (const e of path) {  // only the hops between lanes: within a lane the outlines show the path
      if (m.row[e] < 0) continue;
      if (prev >= 0 && m.rows[m.row[prev]].lane !== m.rows[m.row[e]].lane) {
        ctx.moveTo(GUTTER + (m.end[prev] - this.view.t0) * k, AXIS_H + m.rows[m.row[prev]].y - this.view.y0 + ROW_H / 2);
        ctx.lineTo(GUTTER + (m.start[e] - this.view.t0) * k, AXIS_H + m.rows[m.row[e]].y - this.view.y0 + ROW_H / 2);
      }
      prev = e;
    }
    ctx.stroke();
    ctx.setLineDash([]);
  }

  drawGutter() {
    const { ctx } = this;
    ctx.fillStyle = "#f4f5f7";
    ctx.fillRect(0, AXIS_H, GUTTER, this.height - AXIS_H);
    ctx.save();
    ctx.beginPath();
    ctx.rect(0, AXIS_H, GUTTER, this.height - AXIS_H);
    ctx.clip();
    ctx.font = "11px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    let rank = null;
    for (const lane of this.model.lanes) {
      const y = AXIS_H + lane.y - this.view.y0;
      if (y + lane.h < AXIS_H || y > this.height) { rank = lane.rank; continue; }
      ctx.fillStyle = lane.rank !== rank ? "#222" : "#555";
      const label = `r${lane.rank} ${lane.kind === "stream" ? "▸" : "·"} ${lane.label}`;
      ctx.fillText(label.length > 30 ? `${label.slice(0, 29)}…` : label, 6, y + ROW_H / 2);
      ctx.fillStyle = "#dde1e6";
      ctx.fillRect(0, y + lane.h + LANE_GAP / 2, this.width, 1);
      rank = lane.rank;
    }
    ctx.restore();
  }

  drawAxis() {
    const { ctx } = this;
    const k = this.scale();
    ctx.fillStyle = "#ffffff";
    ctx.fillRect(0, 0, this.width, AXIS_H);
    ctx.fillStyle = "#333";
    ctx.font = "10px system-ui, sans-serif";
    ctx.textBaseline = "middle";
    const step = niceStep(90 / k);
    const digits = Math.max(0, -Math.floor(Math.log10(step)));
    for (let v = Math.ceil(this.view.t0 / step) * step; v <= this.view.t1; v += step) {
      const x = GUTTER + (v - this.view.t0) * k;
      ctx.fillRect(x, AXIS_H - 5, 1, 5);
      ctx.fillText(`${v.toFixed(digits)} ms`, x + 2, AXIS_H / 2 - 1);
    }
    ctx.fillRect(0, AXIS_H - 1, this.width, 1);
  }

  /** The event under (x, y) in canvas pixels, or -1; tiny events are found within 3 px. */
  hit(x, y) {
    const m = this.model;
    if (!m || x < GUTTER || y < AXIS_H) return -1;
    const cy = y - AXIS_H + this.view.y0;
    const r = m.rows.find((row) => cy >= row.y && cy < row.y + ROW_H);
    if (!r) return -1;
    const k = this.scale();
    const t = this.view.t0 + (x - GUTTER) / k;
    const tol = 3 / k;
    let best = -1;
    let bestGap = Infinity;
    for (let i = lowerBound(r.starts, t - tol - r.maxDur, 0, r.ids.length); i < r.ids.length; i++) {
      const e = r.ids[i];
      if (m.start[e] > t + tol) break;
      const gap = t < m.start[e] ? m.start[e] - t : t > m.end[e] ? t - m.end[e] : 0;
      if (gap <= tol && gap < bestGap) { best = e; bestGap = gap; }
    }
    return best;
  }

  showTooltip(e, px, py) {
    const m = this.model;
    const ev = m.events[e];
    const lane = m.lanes[m.rows[m.row[e]].lane];
    const onNew = this.newCrit !== null && this.newCrit[e] === 1;
    fill(this.tooltip,
      el("div", { class: "tt-name", "data-testid": "tooltip-name" }, String(ev.name)),
      el("div", {}, `duration ${ms(ev.dur_ms)}`),
      el("div", {}, `slack ${ms(ev.slack_ms)}`),
      el("div", {}, `category ${ev.category}`),
      el("div", {}, `start ${ev.start_ms >= 0 ? "+" : ""}${ms(ev.start_ms)} · rank ${lane.rank} · ${lane.label}`),
      el("div", { class: m.crit[e] ? "tt-crit" : "" }, m.crit[e] ? "on the critical path" : "off the critical path"),
      onNew ? el("div", { class: "tt-new" }, "on the what-if's critical path") : null);
    this.tooltip.hidden = false;
    const box = this.tooltip.getBoundingClientRect();
    const left = Math.min(px + 14, this.width - box.width - 4);
    const top = py + 16 + box.height > this.height ? Math.max(0, py - box.height - 8) : py + 16;
    this.tooltip.style.left = `${Math.max(0, left)}px`;
    this.tooltip.style.top = `${top}px`;
  }

  hideTooltip() {
    this.tooltip.hidden = true;
  }

  zoomAt(x, factor) {
    const k = this.scale();
    const t = this.view.t0 + (Math.max(x, GUTTER) - GUTTER) / k;
    const span = Math.min(this.model.span * 4, Math.max(1e-4, (this.view.t1 - this.view.t0) * factor));
    const f = (t - this.view.t0) / (this.view.t1 - this.view.t0);
    this.view.t0 = t - f * span;
    this.view.t1 = this.view.t0 + span;
    this.schedule();
  }

  panBy(dx, dy) {
    const dt = dx / this.scale();
    this.view.t0 -= dt;
    this.view.t1 -= dt;
    const maxY = Math.max(0, this.model.height - (this.height - AXIS_H));
    this.view.y0 = Math.min(maxY, Math.max(0, this.view.y0 - dy));
    this.schedule();
  }

  bindInput() {
    const c = this.canvas;
    let drag = null;
    const local = (ev) => { const b = c.getBoundingClientRect(); return [ev.clientX - b.left, ev.clientY - b.top]; };
    c.addEventListener("wheel", (ev) => {
      if (!this.model) return;
      ev.preventDefault();
      const [x] = local(ev);
      if (ev.shiftKey || Math.abs(ev.deltaX) > Math.abs(ev.deltaY)) this.panBy(-(ev.deltaX || ev.deltaY), 0);
      else this.zoomAt(x, Math.exp(ev.deltaY * 0.0015));
    }, { passive: false });
    c.addEventListener("pointerdown", (ev) => { drag = local(ev); c.setPointerCapture(ev.pointerId); this.hideTooltip(); });
    c.addEventListener("pointerup", () => { drag = null; });
    c.addEventListener("pointerleave", () => this.hideTooltip());
    c.addEventListener("dblclick", () => this.resetView());
    c.addEventListener("pointermove", (ev) => {
      if (!this.model) return;
      const [x, y] = local(ev);
      if (drag) { this.panBy(x - drag[0], y - drag[1]); drag = [x, y]; return; }
      const e = this.hit(x, y);
      if (e < 0) this.hideTooltip(); else this.showTooltip(e, x, y);
    });
  }

  /** Whether event `e` is drawn at least 4 px wide in the current view. */
  isShown(e) {
    const m = this.model;
    const y = AXIS_H + m.rows[m.row[e]].y - this.view.y0;
    const x0 = Math.max(GUTTER, GUTTER + (m.start[e] - this.view.t0) * this.scale());
    const x1 = Math.min(this.width, GUTTER + (m.end[e] - this.view.t0) * this.scale());
    return x1 - x0 >= 4 && y >= AXIS_H && y + ROW_H <= this.height;
  }

  /** The centre, in client pixels, of the first event whose name contains `text` (for tests and the
   * page's own links), or null; an event not shown is brought into view first. Draws synchronously. */
  reveal(text) {
    const m = this.model;
    if (!m) return null;
    const matches = m.events.flatMap((ev, i) => (m.row[i] >= 0 && String(ev.name).includes(text) ? [i] : []));
    if (!matches.length) return null;
    let e = matches.find((i) => this.isShown(i));
    if (e === undefined) {
      e = matches[0];
      const span = Math.max((m.end[e] - m.start[e]) * 4, m.span / 200);
      const mid = (m.start[e] + m.end[e]) / 2;
      const maxY = Math.max(0, m.height - (this.height - AXIS_H));
      const y0 = Math.min(maxY, Math.max(0, m.rows[m.row[e]].y - (this.height - AXIS_H) / 2));
      this.view = { t0: mid - span / 2, t1: mid + span / 2, y0 };
    }
    this.draw();
    const b = this.canvas.getBoundingClientRect();
    const x0 = Math.max(GUTTER, GUTTER + (m.start[e] - this.view.t0) * this.scale());
    const x1 = Math.min(this.width, GUTTER + (m.end[e] - this.view.t0) * this.scale());
    return { x: b.left + (x0 + x1) / 2, y: b.top + AXIS_H + m.rows[m.row[e]].y - this.view.y0 + ROW_H / 2 };
  }
}
