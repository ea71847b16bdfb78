// The timeline's model: the API's timeline payload laid out in rows (one per lane and nesting depth)
// and held in typed arrays, each row's events sorted by start, so that a frame finds the visible
// events of a row by binary search.

export const ROW_H = 14;
export const LANE_GAP = 6;
const MAX_ROWS = 8;  // nesting deeper than this is drawn on the last row

export function lowerBound(arr, value, lo, hi) {
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (arr[mid] < value) lo = mid + 1; else hi = mid;
  }
  return lo;
}

function laneOrder(a, b) {
  return a.rank - b.rank || (a.kind === b.kind ? 0 : a.kind === "thread" ? -1 : 1) || String(a.label).localeCompare(String(b.label));
}

/** Rows of the layout: each lane gets one row per nesting depth it uses (up to MAX_ROWS). */
function layoutRows(payload) {
  const lanes = [...(payload.lanes || [])].sort(laneOrder);
  const laneAt = new Map(lanes.map((l, i) => [l.id, i]));
  const depth = new Int32Array(lanes.length);
  for (const e of payload.events) {
    const li = laneAt.get(e.lane);
    if (li !== undefined) depth[li] = Math.max(depth[li], Math.min(e.depth | 0, MAX_ROWS - 1));
  }
  const rows = [];
  const laneRow = new Int32Array(lanes.length);
  let y = 0;
  lanes.forEach((lane, li) => {
    laneRow[li] = rows.length;
    for (let d = 0; d <= depth[li]; d++) rows.push({ lane: li, depth: d, y: y + d * ROW_H });
    lane.y = y;
    lane.h = (depth[li] + 1) * ROW_H;
    y += lane.h + LANE_GAP;
  });
  return { lanes, laneAt, laneRow, rows, height: y };
}

/** The payload as typed arrays, indexed per row by start time. */
export function buildModel(payload) {
  const { lanes, laneAt, laneRow, rows, height } = layoutRows(payload);
  const events = payload.events;
  const n = events.length;
  const start = new Float64Array(n), end = new Float64Array(n), row = new Int32Array(n);
  const cat = new Uint8Array(n), crit = new Uint8Array(n);
  const categories = [];
  const catIndex = new Map();
  const idIndex = new Map();
  const counts = new Int32Array(rows.length + 1);
  for (let i = 0; i < n; i++) {
    const e = events[i];
    const li = laneAt.get(e.lane);
    row[i] = li === undefined ? -1 : laneRow[li] + Math.min(e.depth | 0, MAX_ROWS - 1);
    start[i] = +e.start_ms;
    end[i] = +e.start_ms + Math.max(0, +e.dur_ms);
    if (!catIndex.has(e.category)) { catIndex.set(e.category, categories.length); categories.push(e.category); }
    cat[i] = catIndex.get(e.category);
    crit[i] = e.critical ? 1 : 0;
    idIndex.set(e.id, i);
    if (row[i] >= 0) counts[row[i] + 1]++;
  }
  for (let r = 0; r < rows.length; r++) counts[r + 1] += counts[r];
  const order = new Int32Array(counts[rows.length]);
  const fillAt = counts.slice(0, rows.length);
  for (let i = 0; i < n; i++) if (row[i] >= 0) order[fillAt[row[i]]++] = i;
  rows.forEach((r, ri) => {
    const ids = order.subarray(counts[ri], counts[ri + 1]).sort((a, b) => start[a] - start[b]);
    r.ids = ids;
    r.starts = Float64Array.from(ids, (i) => start[i]);
    r.maxDur = ids.reduce((m, i) => Math.max(m, end[i] - start[i]), 0);
  });
  const path = (payload.critical_path || []).map((id) => idIndex.get(id)).filter((i) => i !== undefined);
  const span = Math.max(+payload.span_ms || 0, ...rows.map((r) => (r.ids.length ? end[r.ids[r.ids.length - 1]] : 0)));
  const hasCritical = path.length > 0 || crit.some((c) => c === 1);
  return { payload, events, lanes, rows, height, start, end, row, cat, crit, categories, idIndex, path, hasCritical,
           span: span || 1 };
}
