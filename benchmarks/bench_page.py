"""Time to first render of a step timeline on the page, in a real headless Chromium against a real
``oracle serve`` app: the real 8-rank DLRM job (its one step, ~20k events in 48 lanes), against
peers run in the same browser on the same payload.

- page, click -> first frame: a click on the step in the chart until the timeline's first frame
  (``performance`` marks the page sets), fetch of the timeline from the API included; its peer is
  the browser's own ``fetch`` + ``JSON.parse`` of the same URL (what any page waits for at least).
- page renderer, payload -> first frame: ``JSON.parse`` of the payload text, the page's layout
  (typed arrays per row) and its first canvas frame; peers: ``JSON.parse`` and one pass over every
  event (the floor of any renderer in JavaScript), and a plain SVG renderer (one ``<rect>`` per
  event, laid out and painted).
- zoom frame: one wheel-zoom step until it is on screen, canvas against the same SVG's viewBox.

Usage: ``python benchmarks/bench_page.py [--runs 7]`` from the repository root (needs
/usr/bin/chromium: ``make setup``).
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bottleneck_oracle.config import Settings  # noqa: E402
from bottleneck_oracle.graphdb import stop_server  # noqa: E402
from tests.server.browser import chromium, open_page, open_step, pick_trace  # noqa: E402
from tests.server.conftest import serving, upload  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
DLRM = REPO.parent / "shared" / "traces" / "real" / "param" / "dlrm_8rank_kineto"

_TWO_FRAMES = "() => new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)))"

# each returns ms; `text` is the timeline payload as the API sent it
_PARSE = """text => { const t = performance.now(); const p = JSON.parse(text); let s = 0;
    for (const e of p.events) s += e.start_ms + e.dur_ms + e.name.length + e.lane + (e.critical ? 1 : 0);
    window.__sink = s; return performance.now() - t; }"""
_CANVAS = """async text => { const t = performance.now();
    await new Promise(r => window.oracleTimeline.show(JSON.parse(text), r));
    await new Promise(r => requestAnimationFrame(r)); return performance.now() - t; }"""
_SVG = """async text => { const t = performance.now(); const p = JSON.parse(text);
    const NS = 'http://www.w3.org/2000/svg', W = 1200, H = 16;
    const lanes = new Map(p.lanes.map((l, i) => [l.id, i])), k = W / p.span_ms;
    const colors = {gpu_compute: '#4e79a7', communication: '#e15759', cpu: '#59a14f', idle: '#bab0ac'};
    const svg = document.createElementNS(NS, 'svg');
    svg.setAttribute('width', W); svg.setAttribute('height', lanes.size * H);
    svg.setAttribute('viewBox', `0 0 ${W} ${lanes.size * H}`); svg.id = 'peer-svg';
    svg.style.cssText = 'position:fixed;left:0;top:0;background:#fff;z-index:9';
    for (const e of p.events) { const r = document.createElementNS(NS, 'rect');
      r.setAttribute('x', e.start_ms * k); r.setAttribute('y', lanes.get(e.lane) * H + Math.min(e.depth, 3) * 3);
      r.setAttribute('width', Math.max(e.dur_ms * k, 0.5)); r.setAttribute('height', H - 4);
      r.setAttribute('fill', colors[e.category] || '#888'); svg.appendChild(r); }
    document.body.appendChild(svg);
    await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r)));
    return performance.now() - t; }"""
_ZOOM_CANVAS = """async () => { const t = performance.now(); window.oracleTimeline.zoomAt(700, 0.8);
    await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))); return performance.now() - t; }"""
_ZOOM_SVG = """async i => { const s = document.getElementById('peer-svg'); const t = performance.now();
    const w = 1200 * 0.8 ** (i + 1); s.setAttribute('viewBox', `${(1200 - w) / 2} 0 ${w} ${s.height.baseVal.value}`);
    await new Promise(r => requestAnimationFrame(() => requestAnimationFrame(r))); return performance.now() - t; }"""
_FETCH = """async url => { const t = performance.now(); const p = await (await fetch(url)).json();
    window.__sink = p.events.length; return performance.now() - t; }"""
_MARKS = """() => { const m = n => performance.getEntriesByName(n)[0].startTime;
    return [m('timeline-rendered') - m('timeline-requested'), m('timeline-data') - m('timeline-requested')]; }"""


def _median(xs: list[float]) -> float:
    return statistics.median(xs)


def _measure(url: str, trace_id: str, runs: int) -> dict[str, list[float]]:
    times: dict[str, list[float]] = {k: [] for k in ("click", "click_fetch", "fetch", "canvas", "parse", "svg",
                                                      "zoom_canvas", "zoom_svg", "draw", "draw_full")}
    with chromium() as browser:
        page, errors = open_page(browser, f"{url}/")
        pick_trace(page, trace_id)
        step = int(page.eval_on_selector("#step-chart .col", "n => n.dataset.step"))
        timeline_url = f"api/traces/{trace_id}/steps/{step}/timeline"
        open_step(page, step)  # warm-up: the server's analysis cache, the page's JIT
        text = page.evaluate("async url => (await fetch(url)).text()", timeline_url)
        for _ in range(runs):
            state = open_step(page, step)
            click, fetched = page.evaluate(_MARKS)
            times["click"].append(click)
            times["click_fetch"].append(fetched)
            times["fetch"].append(page.evaluate(_FETCH, timeline_url))
            times["canvas"].append(page.evaluate(_CANVAS, text))
            times["draw_full"].append(float(page.evaluate("window.oracleRendered.frameMs")))
            times["parse"].append(page.evaluate(_PARSE, text))
            times["svg"].append(page.evaluate(_SVG, text))
            for i in range(6):
                times["zoom_svg"].append(page.evaluate(_ZOOM_SVG, i))
            page.evaluate("() => document.getElementById('peer-svg').remove()")
            page.evaluate(_TWO_FRAMES)
            for _ in range(6):
                times["zoom_canvas"].append(page.evaluate(_ZOOM_CANVAS))
                times["draw"].append(float(page.eval_on_selector("#timeline", "c => c.dataset.lastFrameMs")))
        if errors:
            raise RuntimeError(f"the page reported errors: {errors}")
    print(f"dlrm_8rank step {step}: {state['eventsDrawn']} rectangles in the first frame, "
          f"{state['criticalDrawn']} of them on the critical path; payload {len(text) / 2**20:.2f} MiB")
    return times


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="renders of the step (median reported)")
    args = parser.parse_args()
    if not DLRM.is_dir():
        print(f"{DLRM}: not found (the real traces live in ../shared)")
        return 1
    with tempfile.TemporaryDirectory(prefix="bench_page_") as home:
        settings = Settings(home=Path(home), workers=2)
        try:
            with serving(settings) as url:
                response = upload(url, DLRM, name="dlrm_8rank")
                response.raise_for_status()
                trace = response.json()["trace"]
                print(f"dlrm_8rank: {trace['ranks']} ranks uploaded to a real server; {args.runs} renders each")
                t = _measure(url, trace["id"], args.runs)
        finally:
            stop_server(Path(home))
    m = {k: _median(v) for k, v in t.items()}
    rows = [
        ("page, click -> first frame (API fetch included)", m["click"], m["fetch"], "fetch + JSON.parse"),
        ("  of which the API's timeline fetch + parse", m["click_fetch"], m["fetch"], "fetch + JSON.parse"),
        ("page renderer, payload text -> first frame", m["canvas"], m["svg"], "SVG, one <rect> per event"),
        ("page renderer, payload text -> first frame", m["canvas"], m["parse"], "JSON.parse + one pass"),
        ("  of which the first frame's canvas draw", m["draw_full"], m["svg"], "SVG, one <rect> per event"),
        ("page, one zoom step on screen", m["zoom_canvas"], m["zoom_svg"], "SVG viewBox zoom"),
        ("  of which the canvas draw itself", m["draw"], m["zoom_svg"], "SVG viewBox zoom"),
    ]
    peers = {"SVG, one <rect> per event": m["svg"], "JSON.parse + one pass": m["parse"],
             "fetch + JSON.parse": m["fetch"], "SVG viewBox zoom": m["zoom_svg"]}
    header = ("what", "median ms", "peer", "peer ms", "ratio")
    table = [(w, f"{v:.1f}", name, f"{p:.1f}", f"{v / p:.2f}") for w, v, p, name in rows]
    widths = [max(len(r[i]) for r in (header, *table)) for i in range(len(header))]
    for row in (header, *table):
        print("  ".join(c.ljust(w) if i in (0, 2) else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))))
    print(f"peers measured in the same browser on the same payload: {', '.join(peers)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
