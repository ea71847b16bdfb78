"""A Chrome/Perfetto trace of the analysed job with its critical paths marked.

Every node is written as a complete event; nodes on a critical path carry
``args.critical`` with their contribution, and consecutive critical nodes are
joined by flow arrows (category ``critical_path``). Each rank becomes two
processes (CPU threads, GPU streams), so ranks sit side by side in one file
and arrows cross ranks where the path does. Opens in ui.perfetto.dev.
"""

from __future__ import annotations

import gzip
from collections import defaultdict
from pathlib import Path

import numpy as np
import orjson

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.graph.types import CATEGORIES, NodeKind

__all__ = ["write_overlay"]

_CAT = {NodeKind.CPU_OP: "cpu_op", NodeKind.ANNOTATION: "user_annotation", NodeKind.PYTHON: "python_function",
        NodeKind.RUNTIME: "cuda_runtime", NodeKind.KERNEL: "kernel", NodeKind.MEMCPY: "gpu_memcpy",
        NodeKind.MEMSET: "gpu_memset", NodeKind.COMM: "communication"}


def _critical(a: Analysis, step: int | None, rank: int | None):  # type: ignore[no-untyped-def]
    contrib: dict[int, float] = defaultdict(float)
    category: dict[int, str] = {}
    chains: list[list[int]] = []
    for r in a.steps:
        if (step is not None and r.step != step) or (rank is not None and r.rank != rank):
            continue
        chain = []
        for node, dur, cat in zip(r.path_node.tolist(), r.path_dur_ns.tolist(), r.path_category.tolist()):
            if node >= 0:
                contrib[node] += dur / 1000
                category.setdefault(node, CATEGORIES[cat].value)
                if not chain or chain[-1] != node:
                    chain.append(node)
        chains.append(chain)
    return contrib, category, chains


def write_overlay(a: Analysis, path: Path, step: int | None = None, rank: int | None = None) -> int:
    """Writes the overlay trace to ``path`` (gzipped when it ends in ``.gz``).

    Returns:
        The number of nodes marked critical.
    """
    g = a.graph
    lanes = g.trace.lanes
    pid = (2 * lanes.rank + lanes.is_gpu).astype(np.int64)
    contrib, category, chains = _critical(a, step, rank)
    events: list[dict[str, object]] = []
    for lane in range(len(lanes)):
        r, gpu = int(lanes.rank[lane]), bool(lanes.is_gpu[lane])
        events.append({"ph": "M", "name": "process_name", "pid": int(pid[lane]),
                       "args": {"name": f"rank {r} {'GPU' if gpu else 'CPU'}"}})
        events.append({"ph": "M", "name": "thread_name", "pid": int(pid[lane]), "tid": lane,
                       "args": {"name": lanes.label[lane]}})
    names, starts, durs = g.trace.strings, (g.start_ns / 1000).tolist(), (g.dur_ns / 1000).tolist()
    for i in range(len(g)):
        args: dict[str, object] = {"slack_us": round(int(a.slack_ns[i]) / 1000, 3), "step": int(g.step[i])}
        if i in contrib:
            args.update(critical=True, contrib_us=round(contrib[i], 3), category=category[i])
        events.append({"ph": "X", "cat": _CAT[NodeKind(g.kind[i])], "name": names[g.name[i]],
                       "pid": int(pid[g.lane[i]]), "tid": int(g.lane[i]), "ts": round(starts[i], 3),
                       "dur": round(durs[i], 3), "args": args})
    flow = 0
    for chain in chains:
        for u, v in zip(chain, chain[1:]):
            flow += 1
            for ph, node in (("s", u), ("f", v)):
                ev = {"ph": ph, "id": flow, "cat": "critical_path", "name": "critical_path",
                      "pid": int(pid[g.lane[node]]), "tid": int(g.lane[node]), "ts": round(starts[node], 3)}
                if ph == "f":
                    ev["bp"] = "e"
                events.append(ev)
    doc = orjson.dumps({"traceEvents": events, "displayTimeUnit": "ms",
                        "otherData": {"generator": "bottleneck-oracle", "origin_ns": g.trace.origin_ns}})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(doc, compresslevel=5) if path.name.endswith(".gz") else doc)
    return len(contrib)
