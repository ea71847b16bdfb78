// The hang view: upload a hung job's Flight Recorder dumps (one per rank) to POST api/hang, the JSON of
// `oracle hang --json`, and show its verdict and the stuck group's ranks as rows, its collective sequence
// numbers as columns, the stuck one marked. Everything from a dump is written as text (dom.js).

import { el, fill } from "./dom.js";
import { uploadFiles } from "./upload.js";

const $ = (id) => document.getElementById(id);
const COLUMNS = 12;  // as `oracle hang` prints: the stuck sequence number last but two
const LABEL = { done: "✓", waiting: "…", diverged: "✗", absent: "·" };

/** Each rank's mark at each shown sequence number of `group`, from the report's per-rank calls. */
export function hangGrid(report, group) {
  const stuck = report.collective.seq;
  const calls = {};
  for (const [rank, groups] of Object.entries(report.ranks)) {
    if (!groups[group]) continue;
    calls[rank] = new Map(groups[group].calls.filter((c) => !c[3]).map(([seq, op, done]) => [seq, { op, done }]));
  }
  const seqs = [...new Set(Object.values(calls).flatMap((m) => [...m.keys()]))].sort((a, b) => a - b);
  const shown = seqs.filter((s) => s <= stuck + 2).slice(-COLUMNS);
  const majority = new Map(shown.map((s) => {
    const counts = new Map();
    for (const m of Object.values(calls)) if (m.has(s)) counts.set(m.get(s).op, (counts.get(m.get(s).op) || 0) + 1);
    return [s, [...counts].sort((a, b) => b[1] - a[1])[0][0]];
  }));
  const ranks = [...Object.keys(calls).map(Number), ...report.missing_dumps];  // a rank with no dump: a row of ·
  const rows = ranks.sort((a, b) => a - b).map((rank) => ({
    rank,
    marks: shown.map((s) => {
      const call = calls[rank] && calls[rank].get(s);
      if (!call) return "absent";
      return call.op !== majority.get(s) ? "diverged" : call.done ? "done" : "waiting";
    }),
  }));
  return { seqs: shown, stuck, rows };
}

function render(report) {
  const out = $("hang-result");
  const head = { hang: "Hang", none: "No hang", unknown: "Cannot tell" }[report.verdict];
  const lines = [el("p", { id: "hang-verdict", "data-verdict": report.verdict }, el("strong", {}, `${head}: `),
                    report.explanation[0]),
                 ...report.explanation.slice(1).map((t) => el("p", {}, t)),
                 ...Object.entries(report.where).map(([r, w]) => el("p", { class: "hint" }, `rank ${r}: ${w}`)),
                 ...report.next_steps.map((t) => el("p", {}, el("strong", {}, "Next: "), t))];
  if (report.collective) {
    const g = hangGrid(report, report.collective.group);
    const header = el("tr", {}, el("th", {}, "rank"), ...g.seqs.map((s) => el("th", { class: s === g.stuck ? "stuck" : null }, `#${s}`)));
    const body = g.rows.map((r) => el("tr", { "data-rank": r.rank, class: report.culprit_ranks.includes(r.rank) ? "culprit" : null },
      el("th", {}, String(r.rank)),
      ...r.marks.map((m, i) => el("td", { class: `${m}${g.seqs[i] === g.stuck ? " stuck" : ""}`, title: m }, LABEL[m]))));
    lines.push(el("table", { id: "hang-grid", "data-testid": "hang-grid" },
                  el("caption", {}, `group ${report.collective.group}: ✓ done · … waiting · ✗ differs · · not entered`),
                  header, ...body));
  }
  if (report.missing_dumps.length) lines.push(el("p", { class: "error" }, `no dump from rank(s) ${report.missing_dumps.join(", ")}`));
  fill(out, ...lines);
  out.dataset.state = "done";
}

function upload(ev) {
  ev.preventDefault();
  uploadFiles("hang", "api/hang", "choose the dump files first (one per rank)", render);
}

$("hang-form")?.addEventListener("submit", upload);
