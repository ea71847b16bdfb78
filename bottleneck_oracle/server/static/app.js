// The page: trace picker and upload, step chart, step timeline, findings, what-if and chat, wired to
// the HTTP API. Every string from a trace is written as text (dom.js, canvas fillText), never as HTML.

import { call, getJSON, postJSON, streamEvents } from "./api.js";
import { el, fill, ms } from "./dom.js";
import { drawStepChart, stepSeries } from "./stepchart.js";
import { Timeline, colorOf } from "./timeline.js";
import { drawGpuStrip } from "./gpustrip.js";
import "./compare.js";  // the comparison view wires itself
import "./hang.js";  // and so does the hang view
import "./stragglers.js";  // and the pipeline stragglers view

const $ = (id) => document.getElementById(id);
const state = { traces: [], trace: null, series: null, step: null, findings: [], loadSeq: 0 };
const timeline = new Timeline($("timeline"), $("tooltip"));
window.oracleTimeline = timeline;

function tracePath(suffix = "") {
  return `api/traces/${encodeURIComponent(state.trace)}${suffix}`;
}

function setError(node, err) {
  node.textContent = err ? String(err.message || err).split("\n")[0] : "";
}

function traceLabel(t) {
  const status = t.status && !["ready", "complete"].includes(t.status) ? ` · ${t.status}` : "";
  return `${t.name} · ${t.ranks} ranks · ${t.steps} steps${status}`;
}

async function loadTraces(select) {
  const { traces } = await getJSON("api/traces");
  state.traces = traces;
  const picker = $("trace-picker");
  fill(picker, el("option", { value: "" }, traces.length ? "choose a trace…" : "no trace yet: upload one"),
       ...traces.map((t) => el("option", { value: t.id, "data-name": t.name }, traceLabel(t))));
  const chosen = select ?? (traces.length === 1 ? traces[0].id : null);
  if (chosen) { picker.value = chosen; await openTrace(chosen); }
}

async function openTrace(id) {
  state.trace = id;
  state.step = null;
  const seq = ++state.loadSeq;
  document.body.dataset.trace = id;
  document.body.dataset.ready = "0";
  const [steps, findings] = await Promise.all([getJSON(tracePath("/steps")), getJSON(tracePath("/findings"))]);
  if (seq !== state.loadSeq) return;
  state.series = stepSeries(steps);
  state.findings = findings.findings || [];
  drawChart();
  renderFindings();
  $("run-verdict").textContent = steps.run ? steps.run.headline : "";
  const slow = [...state.series.slow];
  $("step-summary").textContent = slow.length
    ? `Slow step${slow.length > 1 ? "s" : ""}: ${slow.join(", ")}. Click a step to open its timeline.`
    : "No slow step. Click a step to open its timeline.";
  document.body.dataset.ready = "1";
}

function drawChart() {
  if (state.series) drawStepChart($("step-chart"), state.series, state.step, pickStep);
}

function pickStep(step) {
  openStep(step).catch((err) => {
    $("timeline-title").textContent = `Timeline of step ${step}`;
    setError($("timeline-note"), err);
  });
}

function summary(explain) {
  const parts = [`Step ${explain.step} · rank ${explain.rank} · ${ms(explain.wall_ms)}`];
  if (explain.median_ms !== undefined) parts.push(`median ${ms(explain.median_ms)}`);
  if (explain.cause) parts.push(`cause: ${explain.cause.category} (${ms(explain.cause.impact_ms)})`);
  else parts.push(explain.slow ? "slow" : "not slow");
  return parts.join(" · ");
}

async function openStep(step) {
  state.step = step;
  drawChart();
  renderFindings();
  const seq = ++state.loadSeq;
  const title = $("timeline-title");
  title.textContent = `Timeline of step ${step} (loading…)`;
  performance.clearMarks();
  performance.mark("timeline-requested");
  const explained = getJSON(tracePath(`/steps/${step}`)).catch(() => null);  // not awaited before the draw
  const payload = await getJSON(tracePath(`/steps/${step}/timeline`));
  if (seq !== state.loadSeq) return;
  performance.mark("timeline-data");
  title.textContent = `Timeline of step ${step}`;
  $("whatif-result").replaceChildren();
  timeline.show(payload);
  drawGpuStrip($("gpu-strip"), payload);
  renderLegend(timeline.model);
  const note = [`${payload.events.length} events in ${payload.lanes.length} lanes, ${ms(payload.span_ms)}`,
                `critical path: ${(payload.critical_path || []).length} events (outlined, gold line)`];
  if (payload.dropped) note.push(`${payload.dropped} short off-path events left out`);
  $("timeline-note").textContent = note.join(" · ");
  const explain = await explained;
  if (explain && seq === state.loadSeq) $("step-summary").textContent = summary(explain);
}

function renderLegend(model) {
  fill($("legend"), ...model.categories.map((c, i) => el("span", { class: "key", "data-category": c },
    el("i", { class: "swatch", "data-color": colorOf(c, i) }), c)),
    el("span", { class: "key" }, el("i", { class: "swatch path-old" }), "critical path"),
    el("span", { class: "key" }, el("i", { class: "swatch path-new" }), "what-if critical path"));
  for (const sw of $("legend").querySelectorAll("[data-color]")) sw.style.background = sw.dataset.color;
}

function findingItem(f) {
  const ranks = (f.ranks || []).length ? ` · rank ${f.ranks.join(", ")}` : "";
  return el("li", { class: `finding ${f.severity || ""}`, "data-category": f.category, "data-step": f.step ?? "" },
    el("div", { class: "finding-head" }, el("b", {}, f.category), ` · step ${f.step ?? "–"}${ranks} · ${ms(f.impact_ms)}`,
       f.severity ? el("span", { class: "sev" }, f.severity) : null),
    el("div", { class: "finding-text" }, f.evidence || f.summary || ""),
    f.remedy ? el("div", { class: "finding-remedy" }, `remedy: ${f.remedy}`) : null);
}

function renderFindings() {
  const all = $("findings-all").checked || state.step === null;
  const shown = state.findings.filter((f) => all || f.step === state.step || f.step === null);
  fill($("findings"), ...(shown.length ? shown.map(findingItem)
    : [el("li", { class: "empty" }, state.step === null ? "no findings" : `no findings for step ${state.step}`)]));
}

function predictors(result) {
  const p = result.predicted_ms || result.predictions || {};
  return Array.isArray(p) ? p.map((x) => [x.predictor || x.name, x.predicted_ms ?? x.ms]) : Object.entries(p);
}

function newPathIds(result) {
  for (const v of [result.critical_path_ids, result.new_critical_path_ids, result.critical_path,
                   result.new_critical_path && result.new_critical_path.nodes]) {
    if (Array.isArray(v)) return v;
  }
  return [];
}

async function runWhatIf(ev) {
  ev.preventDefault();
  const out = $("whatif-result");
  if (!state.trace) { fill(out, el("p", { class: "error" }, "choose a trace first")); return; }
  const edit = $("whatif-edit").value.trim();
  fill(out, el("p", { class: "hint" }, `predicting ${edit}…`));
  out.dataset.state = "running";
  try {
    const r = await postJSON(tracePath("/whatif"), { edits: [edit], step: state.step });
    const rows = predictors(r).map(([name, v]) => el("tr", { "data-predictor": name, class: name === r.chosen ? "chosen" : "" },
      el("td", {}, name), el("td", { class: "num predicted" }, ms(v)),
      el("td", { class: "num" }, r.baseline_ms ? `${(100 * (v - r.baseline_ms) / r.baseline_ms).toFixed(1)}%` : "")));
    fill(out, el("p", {}, `step ${r.step ?? state.step} baseline ${ms(r.baseline_ms)}`),
         el("table", {}, el("tr", {}, el("th", {}, "predictor"), el("th", {}, "predicted"), el("th", {}, "change")), ...rows),
         r.chosen ? el("p", { class: "hint" }, `trusted: ${r.chosen}${r.why ? ` (${r.why})` : ""}`) : null);
    const ids = newPathIds(r);
    if (state.step !== null && (r.step === undefined || r.step === state.step)) timeline.overlay(ids);
    out.append(el("p", { class: "hint" }, `new critical path: ${ids.length} events, overlaid dashed in magenta`));
    out.dataset.state = "done";
  } catch (err) {
    fill(out, el("p", { class: "error", "data-testid": "whatif-error" }, String(err.message)));
    out.dataset.state = "error";
  }
}

// One conversation per page: follow-ups ("what should I do about it?") refer to its earlier answers.
function chatSession() {
  if (!state.chatSession) {
    const random = window.crypto && crypto.randomUUID ? crypto.randomUUID() : `${Date.now()}-${Math.random()}`;
    state.chatSession = `page-${random.replace(/[^A-Za-z0-9-]/g, "")}`.slice(0, 64);
  }
  return state.chatSession;
}

function toolLabel(data) {
  const args = Object.entries(data.args || {}).map(([k, v]) => {
    const s = typeof v === "string" ? `'${v.length > 60 ? `${v.slice(0, 57)}...` : v}'` : JSON.stringify(v);
    return `${k}=${s}`;
  });
  return `→ ${data.name}(${args.join(", ")})`;
}

// The answer contract: the verdict first, the evidence with the tool each line came from, Do, Check.
// Trace strings are in every field: they only ever become text nodes.
function showReply(answer, data) {
  if (!data.verdict) { answer.textContent = data.answer || ""; return; }
  const parts = [el("strong", { class: "verdict" }, data.verdict)];
  for (const e of data.evidence || []) {
    parts.push("\n", el("span", { class: "evidence" }, `- ${e.text}`), el("span", { class: "hint" }, e.tool ? ` [${e.tool}]` : ""));
  }
  if (data.action) {
    parts.push("\n", el("span", { class: "action" }, `Do: ${data.action}${data.confidence ? ` (confidence: ${data.confidence})` : ""}`));
  }
  if (data.check) parts.push("\n", el("span", { class: "check" }, "Check: "), el("code", {}, data.check));
  answer.replaceChildren(...parts);
}

function onChatEvent(event, data, tools, answer) {
  if (event === "tool") {
    tools.append(el("li", { class: "running", "data-tool": data.name }, toolLabel(data)));
  } else if (event === "tool_done") {
    const li = [...tools.querySelectorAll("li.running")].find((n) => n.dataset.tool === data.name);
    if (li) { li.className = "done"; li.append(` ✓ ${data.ms ?? ""}${data.ms !== undefined ? " ms" : ""}`); }
  } else if (event === "answer") {
    showReply(answer, data);
    answer.dataset.cause = (data.cause && data.cause.category) || "";
    answer.dataset.state = "done";
  } else if (event === "error") {
    answer.textContent = `error: ${data.detail || data}`;
    answer.dataset.state = "error";
  }
}

async function ask(ev) {
  ev.preventDefault();
  const question = $("chat-input").value.trim();
  if (!question) return;
  const tools = $("chat-tools");
  const answer = $("chat-answer");
  tools.replaceChildren(el("li", { class: "question" }, question));
  answer.textContent = "thinking…";
  answer.dataset.state = "running";
  $("chat-send").disabled = true;
  try {
    await streamEvents("api/ask", { question, trace: state.trace, llm: "offline", session: chatSession() },
                       (event, data) => onChatEvent(event, data, tools, answer));
    if (answer.dataset.state === "running") { answer.textContent = "the stream ended with no answer"; answer.dataset.state = "error"; }
  } catch (err) {
    answer.textContent = `error: ${err.message}`;
    answer.dataset.state = "error";
  } finally {
    $("chat-send").disabled = false;
  }
}

async function upload(ev) {
  ev.preventDefault();
  const files = $("upload-files").files;
  setError($("upload-error"), null);
  if (!files.length) { setError($("upload-error"), "choose one trace file per rank first"); return; }
  const form = new FormData();
  for (const f of files) form.append("files", f, f.name);
  if ($("upload-name").value.trim()) form.append("name", $("upload-name").value.trim());
  $("upload-status").textContent = `uploading ${files.length} file(s)…`;
  try {
    const res = await call("api/traces", { method: "POST", body: form });
    const { trace } = await res.json();
    $("upload-status").textContent = `added ${trace.name}`;
    await loadTraces(trace.id);
  } catch (err) {
    $("upload-status").textContent = "";
    setError($("upload-error"), err);
  }
}

function guard(fn) {
  return (...args) => fn(...args).catch((err) => setError($("upload-error"), err));
}

$("trace-picker").addEventListener("change", guard(async (ev) => { if (ev.target.value) await openTrace(ev.target.value); }));
$("upload-form").addEventListener("submit", guard(upload));
$("whatif-form").addEventListener("submit", guard(runWhatIf));
$("chat-form").addEventListener("submit", guard(ask));
$("findings-all").addEventListener("change", renderFindings);
$("timeline-reset").addEventListener("click", () => timeline.resetView());
window.addEventListener("resize", drawChart);
window.oracle = { openStep: pickStep, openTrace: guard(openTrace), state };
guard(loadTraces)();
