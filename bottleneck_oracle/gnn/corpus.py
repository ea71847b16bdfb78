"""A built corpus (``oracle dataset build``) as step graphs, what-if variants and the replay baseline.

Each sample is analysed once; its steps become StepGraphs, and every edit of
its ``whatif.json`` that names nodes of the trace (a kernel class or a
collective made faster) becomes a variant: the node mask, the speed-up, the
true wall time of each step after the edit, what replaying the edited DAG
predicts, and the interference levers of that replay. Edits that change the
program itself (more micro-batches, another data-parallel degree, a removed
injection) are not node edits and are skipped.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np

from bottleneck_oracle.analysis.analysis import Analysis, analyze
from bottleneck_oracle.capture.capture import load_manifest
from bottleneck_oracle.capture.instrument import CHECKPOINT_ANNOTATION, LOAD_ANNOTATION
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.gnn.data import StepGraph, step_graphs
from bottleneck_oracle.graph.op_classes import op_class_mask
from bottleneck_oracle.graph.types import NodeKind
from bottleneck_oracle.replay.engine import Edit, replay
from bottleneck_oracle.replay.interference import interference_levers
from bottleneck_oracle.synth.dataset import load_index
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.truth.edits import WHATIF_NAME, EditKind, edit_from_json, edit_type
from bottleneck_oracle.truth.manifest import MANIFEST_NAME

__all__ = [
    "WhatIf", "Sample", "node_edit", "injection_removal", "load_sample", "load_split", "load_captures",
    "replayed_step_ms",
]


@dataclass(frozen=True, slots=True)
class WhatIf:
    """One node edit of one sample: per step it touches, its mask, the truth and the replay's prediction.

    Args:
        label (str): ``kernel_faster:gemm``, ``collective_faster:allreduce``, ``remove_injection``.
        speedup (float): how much faster the edited nodes are.
        graphs (list[int]): the sample's step graphs the edit touches (index into ``Sample.graphs``).
        masks (list[np.ndarray]): bool mask over each of those StepGraphs' nodes.
        true_ms (list[float]): the step's wall time after the edit (its slowest rank).
        replay_ms (list[float]): what replaying the edited DAG predicts.
        levers (list[np.ndarray]): float32 ms per node of each of those StepGraphs: what each kernel's
            interference changes on the replay, per unit of its sensitivity (``replay/interference.py``).
    """

    label: str
    speedup: float
    graphs: list[int]
    masks: list[np.ndarray]
    true_ms: list[float]
    replay_ms: list[float]
    levers: list[np.ndarray]


@dataclass(frozen=True, slots=True)
class Sample:
    """One trace: its observed steps, what replaying them gives back, and its node what-ifs."""

    sample_id: str
    split: str
    graphs: list[StepGraph]
    replay_ms: list[float]
    whatifs: list[WhatIf]


def node_edit(a: Analysis, kind: str, target: str, speedup: float) -> tuple[Edit, np.ndarray] | None:
    """The replay Edit and node mask of a what-if edit, or None for one that is not a node edit.

    ``kernel_faster`` picks kernels of an op class (OP_CLASSES), ``collective_faster``
    the communication nodes of one collective type. (Removing an injection is a node
    edit only in a real capture: see ``injection_removal``.)
    """
    if kind == "kernel_faster":
        mask = op_class_mask(a.graph, target) & (a.graph.kind == NodeKind.KERNEL)
        return Edit(speedup, kinds=(NodeKind.KERNEL,), name=_exact_mask_name(a, mask)), mask
    if kind == "collective_faster":
        edit = Edit(speedup, kinds=(NodeKind.COMM,), collective=target)
        return edit, edit.select(a)
    return None


# The annotation an injected fault lands in: the batch fetch (DataLoader's own, or the instrumented
# loader's) and the checkpoint save.
_INJECTED_NODE = {
    "dataloader_stall": rf"DataLoader.*__next__|^{re.escape(LOAD_ANNOTATION)}$",
    "checkpoint_stall": rf"^{re.escape(CHECKPOINT_ANNOTATION)}$",
}


def injection_removal(a: Analysis, capture: Path, index: int) -> tuple[Edit, np.ndarray] | None:
    """The node edit that takes injection ``index`` of a real capture out, or None.

    A stalled batch fetch becomes as short as it was without its stall; a checkpoint
    save is removed. Sleeps between ops (a host pause, a straggler) leave no node to
    edit, and a fault on several ranks no single speed-up: None.
    """
    truths = load_manifest(capture).ground_truth
    if index >= len(truths):
        return None
    truth = truths[index]
    name = _INJECTED_NODE.get(truth.category)
    if name is None or truth.injected_ms is None or len(truth.ranks) != 1:
        return None
    probe = Edit(1.0, kinds=(NodeKind.ANNOTATION,), name=name, ranks=truth.ranks, steps=(truth.step,))
    mask = probe.select(a)
    if mask.sum() != 1:
        return None
    if truth.category == "checkpoint_stall":
        speedup = float("inf")
    else:
        dur_ms = float(a.graph.dur_ns[mask][0]) / 1e6
        speedup = dur_ms / max(dur_ms - truth.injected_ms, 1e-3)
    return replace(probe, speedup=speedup), mask


def _exact_mask_name(a: Analysis, mask: np.ndarray) -> str:
    """A regex matching exactly the names of the masked nodes, so replay edits the same nodes."""
    names = sorted({a.graph.trace.strings[i] for i in np.unique(a.graph.name[mask])})
    return "^(" + "|".join(re.escape(n) for n in names) + ")$" if names else "^$"


def _max_per_step(steps: np.ndarray, values_ms: np.ndarray) -> dict[int, float]:
    out: dict[int, float] = {}
    for s, v in zip(steps.tolist(), values_ms.tolist()):
        out[s] = max(out.get(s, 0.0), v)
    return out


def load_sample(path: Path, sample_id: str = "", split: str = "", *, bidirectional: bool = True,
                max_nodes: int = 200_000) -> Sample:
    """Analyses one sample folder and gathers its step graphs and node what-ifs."""
    a = analyze(read_trace(path))
    graphs = step_graphs(a, bidirectional=bidirectional, max_nodes=max_nodes)
    whatifs = []
    whatif_path = Path(path) / WHATIF_NAME
    raw = json.loads(whatif_path.read_text())["edits"] if whatif_path.is_file() else []
    for entry in raw:
        edit = edit_from_json(entry["edit"])
        label = edit_type(edit)
        if edit.kind == EditKind.REMOVE_INJECTION and "traces" in entry:  # a re-capture: truth from a real run
            found = injection_removal(a, Path(path), edit.value)
        elif edit.kind == EditKind.SCALE and ":" in label:
            found = node_edit(a, *label.split(":"), edit.factor)
        else:
            found = None
        if found is None:
            continue
        replay_edit, mask = found
        truth = _max_per_step(np.array([r[0] for r in entry["step_ms"]]), np.array([r[3] for r in entry["step_ms"]]))
        replayed = interference_levers(a, [replay_edit])
        touched = [i for i, g in enumerate(graphs) if mask[g.node].any()]
        missing = [graphs[i].step for i in touched
                   if graphs[i].step not in truth or graphs[i].step not in replayed.step_ms]
        if missing:
            raise ConfigError(f"{whatif_path}: the what-if truth lacks steps {missing}")
        whatifs.append(WhatIf(
            label=label,
            speedup=replay_edit.speedup, graphs=touched, masks=[mask[graphs[i].node] for i in touched],
            true_ms=[truth[graphs[i].step] for i in touched],
            replay_ms=[replayed.step_ms[graphs[i].step] for i in touched],
            levers=[(replayed.lever_ns[graphs[i].node] / 1e6).astype(np.float32) for i in touched],
        ))
    observed = replayed_step_ms(a, [])
    return Sample(sample_id or Path(path).name, split, graphs, [observed[g.step] for g in graphs], whatifs)


def replayed_step_ms(a: Analysis, edits: list[Edit]) -> dict[int, float]:
    """Step -> wall ms of its slowest complete rank after replaying ``edits``."""
    result = replay(a, edits)
    done = np.array([(s, r) not in a.partial_steps for s, r in zip(result.step, result.rank)], dtype=bool)
    return _max_per_step(result.step[done], result.after_ns[done] / 1e6)


def load_split(data_dir: Path, split: str, *, bidirectional: bool = True, max_nodes: int = 200_000,
               progress: Callable[[int, int, str], None] | None = None) -> list[Sample]:
    """Every sample of one split of a corpus (``train``, ``val``, ``test``, ``ood``)."""
    entries = [e for e in load_index(data_dir) if e["split"] == split]
    return list(_load(data_dir, entries, bidirectional, max_nodes, progress))


def load_captures(folder: Path, progress: Callable[[int, int, str], None] | None = None) -> list[Sample]:
    """Real captures (``oracle capture``): ``folder`` itself when it holds a manifest, else each
    sub-folder that does, as split ``captured``.

    Raises:
        ConfigError: no capture there.
    """
    folder = Path(folder)
    found = [folder] if (folder / MANIFEST_NAME).is_file() else sorted(
        p.parent for p in folder.glob(f"*/{MANIFEST_NAME}"))
    if not found:
        raise ConfigError(f"{folder}: no {MANIFEST_NAME} there or one level down; capture with `oracle capture`")
    entries = [{"path": str(p.relative_to(folder)) if p != folder else ".", "id": p.name, "split": "captured"}
               for p in found]
    return list(_load(folder, entries, True, 200_000, progress))


def _load(data_dir: Path, entries: list[dict[str, object]], bidirectional: bool, max_nodes: int,
          progress: Callable[[int, int, str], None] | None) -> Iterator[Sample]:
    for i, entry in enumerate(entries):
        sample = load_sample(Path(data_dir) / str(entry["path"]), str(entry["id"]), str(entry["split"]),
                             bidirectional=bidirectional, max_nodes=max_nodes)
        if progress:
            progress(i + 1, len(entries), sample.sample_id)
        yield sample
