"""Two runs compared: a verdict with a confidence from the runs' own spread, how comparable they are,
and what moved, largest first.

A run's step time is, per step, the longest wall of any rank (the job waits for it). Its steady steps
leave out the warm-up (leading steps well above the rest) and the outliers (steps slow by the
slow-step rule); both are named. The verdict compares the medians of the steady steps; its interval
and confidence come from a bootstrap of those steps (a fixed seed: the same runs give the same
answer). What moved is read from the steady steps too: the critical-path attribution, the GPU
timeline, op classes, ops and kernels matched by their normalized names, collectives, findings, the
median step's critical path, and each rank.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.findings.finding import untraced_wait_ns
from bottleneck_oracle.findings.slow_steps import SLOW_MADS, SLOW_RATIO
from bottleneck_oracle.graph.critical_path import StepReport
from bottleneck_oracle.graph.gpu_timeline import FIELDS
from bottleneck_oracle.graph.names import collective_type
from bottleneck_oracle.graph.op_classes import OP_CLASSES, classify_strings
from bottleneck_oracle.graph.types import CATEGORIES, Category, NodeKind, Role

__all__ = ["BOOTSTRAP", "UNCHANGED_PCT", "RunDiff", "diff_runs", "normalized_name", "steady_steps"]

BOOTSTRAP = 2000  # resamples of each run's steady steps
UNCHANGED_PCT = 1.0  # a change of the median step below this share of BASE's is no change
_TOP = 10
UNTRACED = "untraced_wait"  # the attribution row of GPU work waiting for what the trace does not show
_GPU_NODES = (NodeKind.KERNEL, NodeKind.MEMCPY, NodeKind.MEMSET, NodeKind.COMM)
_DTYPE_BYTES = {"Float": 4, "float": 4, "Half": 2, "BFloat16": 2, "Double": 8, "Int": 4, "Long": 8, "Byte": 1,
                "Char": 1, "Bool": 1, "Short": 2, "Float8_e4m3fn": 1, "Float8_e5m2": 1}


@lru_cache(maxsize=1 << 16)
def normalized_name(name: str) -> str:
    """An op or kernel name without what changes between builds and runs: template arguments, a
    kernel's parameter list, addresses and instance numbers (``#3``)."""
    out = name
    while True:
        stripped = re.sub(r"<[^<>]*>", "", out)
        if stripped == out:
            break
        out = stripped
    # a kernel's parameter list hangs on its name ("...Sum_float(ncclWorkElem)"); "Memcpy DtoD (Device ->
    # Device)" keeps its spaced one, which says where the copy went
    out = re.sub(r"(?<=[\w>\]])\([^()]*\)$", "", out.removeprefix("void "))
    out = re.sub(r"0x[0-9a-fA-F]+", "0x", out)
    out = re.sub(r"#\d+", "#", out)
    return " ".join(out.split()) or name  # a name that is all brackets is kept whole, not emptied


@dataclass(frozen=True, slots=True)
class Steady:
    """A run's step times (per step: the longest wall of any rank, and that rank) and which are steady."""

    walls: dict[int, tuple[int, int]]
    steady: tuple[int, ...]
    warmup: tuple[int, ...]
    outliers: tuple[int, ...]
    partial: tuple[int, ...]

    @property
    def steady_ms(self) -> np.ndarray:
        return np.array([self.walls[s][0] / 1e6 for s in self.steady])


def steady_steps(a: Analysis) -> Steady:
    """The steps of ``a`` by number, with warm-up, outliers and partial steps set aside."""
    walls: dict[int, tuple[int, int]] = {}
    partial = sorted({s for s, _ in a.partial_steps})
    for r in a.steps:
        if r.step not in partial and r.wall_ns > walls.get(r.step, (-1, -1))[0]:
            walls[r.step] = (r.wall_ns, r.rank)
    order = sorted(walls)
    if len(order) < 3:
        return Steady(walls, tuple(order), (), (), tuple(partial))
    ms = np.array([walls[s][0] for s in order], dtype=np.float64)
    warm = 0
    while warm < len(order) - 2 and ms[warm] > SLOW_RATIO * float(np.median(ms[warm + 1:])):
        warm += 1
    rest = ms[warm:]
    med = float(np.median(rest))
    mad = float(np.median(np.abs(rest - med))) * 1.4826
    out = {s for s, w in zip(order[warm:], rest.tolist()) if w > SLOW_RATIO * med and w > med + SLOW_MADS * mad}
    steady = tuple(s for s in order[warm:] if s not in out)
    return Steady(walls, steady, tuple(order[:warm]), tuple(sorted(out)), tuple(partial))


@dataclass(frozen=True, slots=True)
class RunDiff:
    """NEW against BASE. Times in ms per steady step; ``moved`` lists are largest change first."""

    verdict: str  # "faster", "slower" or "unchanged"
    delta_ms: float
    delta_pct: float
    interval_pct: tuple[float, float]  # 95% bootstrap interval of delta_pct
    confidence: float | None  # probability of the verdict's direction (unchanged: of no larger change); None: no spread
    boot_pct: np.ndarray = field(repr=False)  # the bootstrap's differences, % of BASE's median (one value: no spread)
    base: dict[str, object]
    new: dict[str, object]
    comparability: dict[str, object]
    moved: dict[str, list[dict[str, object]]] = field(default_factory=dict)

    def slower_than(self, pct: float) -> float | None:
        """Probability that NEW is slower than BASE by more than ``pct`` % (None: no spread to tell)."""
        if self.confidence is None:
            return None
        return float(np.mean(self.boot_pct > pct))

    def headline(self) -> str:
        """The verdict in one sentence."""
        sure = f", confidence {self.confidence:.0%}" if self.confidence is not None else ", no step spread to judge by"
        lo, hi = self.interval_pct
        if self.verdict == "unchanged":
            return (f"unchanged: {self.delta_ms:+g} ms ({self.delta_pct:+.1f}%) per steady step, 95% interval "
                    f"{lo:+.1f}% to {hi:+.1f}%{sure}")
        return (f"NEW is {self.verdict}: {abs(self.delta_ms):g} ms ({abs(self.delta_pct):.1f}%) per steady step, 95% "
                f"interval {lo:+.1f}% to {hi:+.1f}%{sure}")

    def to_json(self) -> dict[str, object]:
        return {"verdict": self.verdict, "headline": self.headline(), "delta_ms": self.delta_ms,
                "delta_pct": self.delta_pct, "interval_pct": list(self.interval_pct), "confidence": self.confidence,
                "base": self.base, "new": self.new, "comparability": self.comparability, "moved": self.moved}


def _run_summary(a: Analysis, s: Steady) -> dict[str, object]:
    t = a.graph.trace
    return {"ranks": len(t.ranks), "devices": sorted({d for i in t.ranks for d in i.devices}),
            "steps": sorted(s.walls), "steady": list(s.steady), "warmup": list(s.warmup), "outliers": list(s.outliers),
            "partial": list(s.partial), "median_ms": round(float(np.median(s.steady_ms)), 3) if s.steady else None,
            "steady_ms": [round(x, 3) for x in s.steady_ms.tolist()]}


def _bootstrap(base: np.ndarray, new: np.ndarray) -> np.ndarray:
    """Differences of medians (NEW - BASE, as % of BASE's median) over resamples of each run's steps."""
    rng = np.random.default_rng(0)
    b = np.median(rng.choice(base, (BOOTSTRAP, len(base))), axis=1)
    n = np.median(rng.choice(new, (BOOTSTRAP, len(new))), axis=1)
    return 100 * (n - b) / float(np.median(base))


def _reports(a: Analysis, s: Steady) -> list[StepReport]:
    """The report of each steady step on the rank whose wall was the step's time."""
    by = {(r.step, r.rank): r for r in a.steps}
    return [by[(step, s.walls[step][1])] for step in s.steady]


def _median_of(rows: list[dict[str, float]], keys: list[str]) -> dict[str, float]:
    return {k: float(np.median([r.get(k, 0.0) for r in rows])) if rows else 0.0 for k in keys}


def _deltas(base: dict[str, float], new: dict[str, float], key: str, min_ms: float = 1e-3) -> list[dict[str, object]]:
    out = [{key: k, "base_ms": round(float(base.get(k, 0.0)), 3), "new_ms": round(float(new.get(k, 0.0)), 3),
            "delta_ms": round(float(new.get(k, 0.0) - base.get(k, 0.0)), 3)} for k in base.keys() | new.keys()]
    out = [d for d in out if abs(d["delta_ms"]) >= min_ms]  # type: ignore[arg-type]
    return sorted(out, key=lambda d: (-abs(d["delta_ms"]), str(d[key])))  # type: ignore[arg-type]


def _breakdown(a: Analysis, s: Steady) -> dict[str, float]:
    """Median attribution of the steady steps; the GPU's wait for work the trace does not hold is its own
    row (``untraced_wait``), out of ``idle``, so that the rows still sum to the wall."""
    rows = []
    for r in _reports(a, s):
        row = {c.value: v / 1e6 for c, v in r.breakdown_ns.items()}
        row[UNTRACED] = untraced_wait_ns(a.graph, r) / 1e6
        row[Category.IDLE.value] -= row[UNTRACED]
        rows.append(row)
    return _median_of(rows, [c.value for c in CATEGORIES] + [UNTRACED])


def _gpu(a: Analysis, s: Steady) -> dict[str, float]:
    g = a.graph
    row = g.steps.row_of()
    rows = [a.gpu.record(row[(st, s.walls[st][1])]) for st in s.steady if (st, s.walls[st][1]) in row]
    return _median_of(rows, [f"{f}_ms" for f in FIELDS])


def _work(a: Analysis, s: Steady) -> tuple[dict[str, float], dict[str, float], dict[str, dict[str, float]], Counter]:
    """Per steady step, over all ranks: time by normalized op/kernel name (the innermost work only, so no
    time counts twice), by op class, and by collective kind (count, ms, MB); and the model's op multiset
    (the ops under a data loader's fetch left out)."""
    g = a.graph
    steady = np.isin(g.step, list(s.steady))
    has_child = np.zeros(len(g), dtype=bool)
    has_child[g.parent[g.parent >= 0]] = True
    leaf = steady & ~has_child & (g.kind != NodeKind.ANNOTATION)
    n = max(len(s.steady), 1)
    names = g.trace.strings
    by_name: dict[str, float] = defaultdict(float)
    sums = np.bincount(g.name[leaf], weights=g.dur_ns[leaf], minlength=len(names))
    for i in np.flatnonzero(sums).tolist():
        by_name[normalized_name(names[i])] += float(sums[i]) / 1e6 / n
    op, _, _ = classify_strings(names)
    by_class: dict[str, float] = defaultdict(float)
    for i in np.flatnonzero(sums).tolist():
        by_class[OP_CLASSES[op[i]][0] if op[i] >= 0 else "other"] += float(sums[i]) / 1e6 / n
    colls: dict[str, dict[str, float]] = defaultdict(lambda: {"count": 0.0, "ms": 0.0, "mb": 0.0})
    ev = g.trace.events
    comm = np.flatnonzero(steady & (g.kind == NodeKind.COMM))
    for node in comm.tolist():
        kind = collective_type(names[g.name[node]]) or "other"
        row = g.event[node]
        nelems = int(ev.nelems[row])
        size = _DTYPE_BYTES.get(names[ev.dtype[row]], 0) * nelems if nelems > 0 else 0
        c = colls[kind]
        c["count"] += 1 / n
        c["ms"] += float(g.dur_ns[node]) / 1e6 / n
        c["mb"] += size / 2**20 / n
    # the model's ops: a data loader's own ops leave the trace when its workers take them over
    model = steady & (g.kind == NodeKind.CPU_OP) & ~g.under(g.role == Role.DATALOADER)
    ops = Counter(normalized_name(names[i]) for i in g.name[model].tolist())
    return by_name, by_class, dict(colls), ops


def _similarity(a: Counter, b: Counter, steps_a: int, steps_b: int) -> float:
    """Weighted Jaccard of two op multisets, per step."""
    keys = a.keys() | b.keys()
    if not keys:
        return 1.0
    x = {k: a[k] / max(steps_a, 1) for k in keys}
    y = {k: b[k] / max(steps_b, 1) for k in keys}
    return sum(min(x[k], y[k]) for k in keys) / sum(max(x[k], y[k]) for k in keys)


def _comparability(a: Analysis, b: Analysis, sa: Steady, sb: Steady, ops_a: Counter, ops_b: Counter
                   ) -> dict[str, object]:
    reasons: list[str] = []
    dev_a = sorted({d for i in a.graph.trace.ranks for d in i.devices})
    dev_b = sorted({d for i in b.graph.trace.ranks for d in i.devices})
    if dev_a != dev_b:
        reasons.append(f"different hardware: {', '.join(dev_a) or 'none recorded'} against "
                       f"{', '.join(dev_b) or 'none recorded'}")
    world_a = max((i.world_size or len(a.graph.trace.ranks) for i in a.graph.trace.ranks), default=0)
    world_b = max((i.world_size or len(b.graph.trace.ranks) for i in b.graph.trace.ranks), default=0)
    if world_a != world_b:
        reasons.append(f"different world size: {world_a} against {world_b} ranks")
    if len(a.graph.trace.ranks) != len(b.graph.trace.ranks):
        reasons.append(f"{len(a.graph.trace.ranks)} rank file(s) against {len(b.graph.trace.ranks)}")
    similar = _similarity(ops_a, ops_b, len(sa.steady), len(sb.steady))
    if similar < 0.9:
        reasons.append(f"different model or batch: the ops of a step are {similar:.0%} alike (weighted by count)")
    if len(sa.steady) < 3 or len(sb.steady) < 3:
        reasons.append(f"few steady steps ({len(sa.steady)} and {len(sb.steady)}): the confidence is weak")
    level = "low" if similar < 0.6 or dev_a != dev_b or world_a != world_b else "medium" if reasons else "high"
    return {"level": level, "op_similarity": round(similar, 3), "reasons": reasons,
            "unknown": ["PyTorch version and batch shape (a Kineto trace does not record them)"]}


def _findings(a: Analysis, s: Steady) -> dict[tuple[str, tuple[int, ...]], float]:
    """The major findings of the steady steps, ms per steady step: a run-wide finding (already a step's
    median) as it is, one of a steady step summed over the steps and divided by their number. A finding of
    a warm-up, outlier or partial step is set aside with its step."""
    out: dict[tuple[str, tuple[int, ...]], float] = defaultdict(float)
    n = max(len(s.steady), 1)
    for f in a.findings:
        if f.severity == "major" and (f.step is None or f.step in s.steady):
            out[(f.category.value, f.ranks)] += f.impact_ms if f.step is None else f.impact_ms / n
    return out


def _finding_moves(a: Analysis, b: Analysis, sa: Steady, sb: Steady) -> list[dict[str, object]]:
    fa, fb = _findings(a, sa), _findings(b, sb)
    out = []
    for key in fa.keys() | fb.keys():
        x, y = fa.get(key, 0.0), fb.get(key, 0.0)
        change = "appeared" if key not in fa else "went away" if key not in fb else (
            "grew" if y > x * 1.2 + 1 else "shrank" if y < x / 1.2 - 1 else "")
        if change:
            out.append({"category": key[0], "ranks": list(key[1]), "change": change, "base_ms": round(x, 3),
                        "new_ms": round(y, 3), "delta_ms": round(y - x, 3)})
    return sorted(out, key=lambda d: -abs(d["delta_ms"]))  # type: ignore[arg-type]


def _path_names(a: Analysis, s: Steady) -> dict[str, float]:
    """The critical path of the median steady step: ms by normalized name."""
    reports = _reports(a, s)
    if not reports:
        return {}
    r = sorted(reports, key=lambda r: r.wall_ns)[len(reports) // 2]
    out: dict[str, float] = defaultdict(float)
    names = a.graph.trace.strings
    for node, dur in zip(r.path_node.tolist(), r.path_dur_ns.tolist()):
        out[normalized_name(names[a.graph.name[node]]) if node >= 0 else "(no op)"] += dur / 1e6
    return out


def _ranks(a: Analysis, b: Analysis, sa: Steady, sb: Steady) -> list[dict[str, object]]:
    """Ranks whose steady steps changed differently from the others' (a new straggler, a slower GPU)."""
    def walls(x: Analysis, s: Steady) -> dict[int, float]:
        per: dict[int, list[float]] = defaultdict(list)
        for r in x.steps:
            if r.step in s.steady:
                per[r.rank].append(r.wall_ns / 1e6)
        return {k: float(np.median(v)) for k, v in per.items()}
    wa, wb = walls(a, sa), walls(b, sb)
    common = sorted(wa.keys() & wb.keys())
    if len(common) < 2:
        return []
    deltas = {k: wb[k] - wa[k] for k in common}
    typical = float(np.median(list(deltas.values())))
    base_med = float(np.median(list(wa.values())))
    odd = [k for k in common if abs(deltas[k] - typical) > max(0.05 * base_med, 1.0)]
    return [{"rank": k, "base_ms": round(wa[k], 3), "new_ms": round(wb[k], 3), "delta_ms": round(deltas[k], 3),
             "others_delta_ms": round(typical, 3)} for k in sorted(odd, key=lambda k: -abs(deltas[k] - typical))]


def diff_runs(base: Analysis, new: Analysis) -> RunDiff:
    """NEW against BASE: the verdict, its confidence, the comparability and what moved.

    A run with no steady step (every step partial) is compared on nothing: the verdict is
    ``unchanged`` with no confidence, and the comparability says why.
    """
    sa, sb = steady_steps(base), steady_steps(new)
    xa, xb = sa.steady_ms, sb.steady_ms
    name_a, class_a, coll_a, ops_a = _work(base, sa)
    name_b, class_b, coll_b, ops_b = _work(new, sb)
    comparability = _comparability(base, new, sa, sb, ops_a, ops_b)
    if not len(xa) or not len(xb) or float(np.median(xa)) <= 0:
        return RunDiff("unchanged", 0.0, 0.0, (0.0, 0.0), None, np.zeros(1), _run_summary(base, sa),
                       _run_summary(new, sb), {**comparability, "level": "low",
                                               "reasons": [*comparability["reasons"], "a run has no complete step"]})
    med_a, med_b = float(np.median(xa)), float(np.median(xb))
    delta_ms, delta_pct = med_b - med_a, 100 * (med_b - med_a) / med_a
    spread = len(xa) > 1 and len(xb) > 1 and (np.ptp(xa) > 0 or np.ptp(xb) > 0)
    boot = _bootstrap(xa, xb) if spread else np.full(1, delta_pct)
    lo, hi = (float(np.percentile(boot, 2.5)), float(np.percentile(boot, 97.5)))
    if abs(delta_pct) < UNCHANGED_PCT or (spread and lo <= 0 <= hi):
        verdict = "unchanged"
        confidence = float(np.mean(np.abs(boot) < max(UNCHANGED_PCT, abs(delta_pct))))
    else:
        verdict = "slower" if delta_ms > 0 else "faster"
        confidence = float(np.mean(boot > 0) if delta_ms > 0 else np.mean(boot < 0))
    moved = {
        "categories": _deltas(_breakdown(base, sa), _breakdown(new, sb), "category"),
        "gpu": _deltas(_gpu(base, sa), _gpu(new, sb), "field") if len(base.gpu_trace) or len(new.gpu_trace) else [],
        "op_classes": _deltas(class_a, class_b, "op_class")[:_TOP],
        "ops": _deltas(name_a, name_b, "op")[:_TOP],
        "collectives": sorted(
            ({"collective": k, "base_count": round(coll_a.get(k, {}).get("count", 0.0), 2),
              "new_count": round(coll_b.get(k, {}).get("count", 0.0), 2),
              "base_ms": round(coll_a.get(k, {}).get("ms", 0.0), 3),
              "new_ms": round(coll_b.get(k, {}).get("ms", 0.0), 3),
              "delta_ms": round(coll_b.get(k, {}).get("ms", 0.0) - coll_a.get(k, {}).get("ms", 0.0), 3),
              "base_mb": round(coll_a.get(k, {}).get("mb", 0.0), 3),
              "new_mb": round(coll_b.get(k, {}).get("mb", 0.0), 3)}
             for k in coll_a.keys() | coll_b.keys()), key=lambda d: -abs(d["delta_ms"])),
        "findings": _finding_moves(base, new, sa, sb),
        "critical_path": _deltas(_path_names(base, sa), _path_names(new, sb), "op")[:_TOP],
        "ranks": _ranks(base, new, sa, sb),
    }
    return RunDiff(verdict, round(delta_ms, 3), round(delta_pct, 2), (round(lo, 2), round(hi, 2)),
                   round(confidence, 3) if spread else None,
                   boot, _run_summary(base, sa), _run_summary(new, sb),
                   comparability, moved)
