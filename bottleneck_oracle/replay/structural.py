"""Structural what-ifs: another data-parallel degree, another number of pipeline micro-batches.

Both change the job's shape, not one op's speed, so both are modelled from the trace's own
numbers: `data_parallel` rescales the gradient collectives by a ring cost fitted on the trace
(over the network of a table by GPU model once a ring spans nodes) and returns per-edge
multipliers for a replay of the point graph; `microbatches` measures each stage's micro-batch
template and re-runs the 1F1B schedule with another count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.analysis.analysis import Analysis
from bottleneck_oracle.graph.types import EdgeType, NodeKind, Role
from bottleneck_oracle.replay.engine import own_time
from bottleneck_oracle.errors import ConfigError
from bottleneck_oracle.replay._collectives import current_degree, gradient_members, rescale_rings, trace_layout
from bottleneck_oracle.replay._one_f_one_b import pipeline_depths, run_step
from bottleneck_oracle.replay._ring import GPUS_PER_NODE, network_of
from bottleneck_oracle.replay._stage_template import StageStep, measure_steps

__all__ = ["Rescaled", "Rescheduled", "data_parallel", "microbatches", "pipeline_microbatches"]

_GPU = (NodeKind.KERNEL, NodeKind.MEMCPY, NodeKind.MEMSET)
_GPU_NOTES = [
    "a receive is issued once its stage is free and completes a transfer after the sender's matching unit; "
    "the lag it adds is the least measured on the trace (plus what a micro-batch's own receive took beyond "
    "it: a slow link stays with its micro-batch); the CPU runs ahead, never waiting for the GPU in the pipeline",
]
_CPU_NOTES = [
    "the micro-batches run on the CPU (a gloo pipeline): a message's lag is the mean measured (latency and "
    "scheduling, not scaled with its size); gloo sends that wait for their receiver are not modelled",
    "CPU pipelines are a rough model: against re-captures of a 2-stage CPU job on a shared 2-core machine it "
    "was within 7% for 2 → 4 and 4 → 2 micro-batches, but 23-44% off for 4 ↔ 8 and 30-69% for 2 ↔ 8",
]


@dataclass(frozen=True, slots=True)
class Rescaled:
    """Per-edge multipliers of the point graph's weights, and what the model behind them assumes.

    Shapes:
        weight_scale: float64[E], one per edge of ``Analysis.points``.
    """

    weight_scale: np.ndarray
    assumptions: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Rescheduled:
    """Predicted wall time of each complete step (its slowest rank, ms) and the model's assumptions."""

    step_ms: dict[int, float]
    assumptions: tuple[str, ...]


def _launched_under(a: Analysis, prefix: str) -> np.ndarray:
    """bool[N]: nodes inside an annotation whose name starts with ``prefix``, and the GPU work they launched."""
    g = a.graph
    names = np.array([s.startswith(prefix) for s in g.trace.strings], dtype=bool)
    inside = g.under(names[g.name] & (g.kind == NodeKind.ANNOTATION))
    src, dst = g.edges_of(EdgeType.LAUNCH)
    inside[dst[inside[src]]] = True
    return inside


def _scale_per_sample(a: Analysis, modelled: np.ndarray, factor: float, node_scale: np.ndarray) -> str:
    """Scales each rank's per-sample work by ``factor`` (a global batch split over more ranks);
    ``modelled`` (bool[N]) are the collectives whose new cost is already set."""
    g = a.graph
    has_gpu = bool(np.isin(g.kind, _GPU).any())
    if has_gpu:
        per_sample = np.isin(g.kind, _GPU)
    else:  # a CPU job's compute is its ops, less the collective calls and data loading
        per_sample = (g.kind == NodeKind.CPU_OP) & (g.role != Role.COLLECTIVE_CALL)
        per_sample &= ~_launched_under(a, "enumerate(DataLoader)")
    per_sample &= ~_launched_under(a, "Optimizer.step")  # per parameter, not per sample
    activation = (g.kind == NodeKind.COMM) & (g.collective >= 0) & ~modelled
    node_scale[(per_sample & ~modelled) | activation] *= factor
    where = "GPU kernels and copies" if has_gpu else "CPU ops"
    return (f"global batch kept: per-sample work ({where} outside the optimizer, tensor- and pipeline-parallel "
            f"transfers) scales linearly by {factor:.4g}; CPU dispatch, data loading and the optimizer stay")


def data_parallel(a: Analysis, dp: int, keep_global_batch: bool = False, net_gbps: float | None = None,
                  net_latency_us: float | None = None) -> Rescaled:
    """Multipliers that turn the traced job into the same job at data-parallel degree ``dp``.

    The current degree is the group size of the gradient collectives. Their transfers are
    rescaled by the ring cost at ``dp`` ranks over that at the current degree, with latency and
    bandwidth fitted per collective kind on the trace's own instances; collectives over every
    rank are rescaled as the world grows. Ranks are taken to sit 8 to a node in Megatron order
    (tensor-parallel ranks adjacent, checked on the traced groups' ranks). A ring that leaves its
    node at ``dp`` runs over the network, which a trace inside one node does not show: its
    bandwidth and latency per GPU come from a table of typical values by the GPU the trace names
    (400 Gb/s NDR InfiniBand, 45 GB/s and 10 µs, for H100/H200/B200; 200 Gb/s HDR, 23 GB/s and
    12 µs, for A100), or from ``net_gbps`` and ``net_latency_us``; one that comes back into a node
    from a trace across nodes takes the table's NVLink numbers. Pipeline sends whose stages land
    on other nodes change link the same way. Compute keeps the slowdown it had from overlapping
    communication. Replay the point graph with ``np.rint(a.points.weight * weight_scale)`` to get
    the new step times.

    Example:
        ```python
        rescaled = data_parallel(a, 8)
        t, _ = longest_path(a.points.index, np.rint(a.points.weight * rescaled.weight_scale).astype(np.int64))
        ```

    Args:
        a (Analysis): the traced job.
        dp (int): the new data-parallel degree (>= 1).
        keep_global_batch (bool): keep the global batch, so each rank's per-sample work
            (GPU work outside the optimizer, or CPU ops on a CPU-only trace, and the
            tensor- and pipeline-parallel transfers) scales by current/``dp``; default: keep
            each rank's batch (compute unchanged).
        net_gbps (float | None): inter-node bus bandwidth per GPU in GB/s (gigabytes, as
            nccl-tests reports it across nodes; 45 for a 400 Gb/s NIC per GPU); default: the
            table's for the traced GPU. With a GPU the table lacks and no value, a ring that
            leaves its node keeps the traced interconnect and the result is a lower bound.
        net_latency_us (float | None): inter-node latency of one ring step in µs; default: the
            table's (10 µs where the GPU is unknown and ``net_gbps`` is given).

    Returns:
        Rescaled: one multiplier per point-graph edge and the assumptions, with the fitted numbers.

    Raises:
        ConfigError: ``dp`` < 1, a network number <= 0, or the trace has no gradient collectives.
    """
    if not (isinstance(dp, (int, np.integer)) and dp >= 1):
        raise ConfigError(f"data_parallel: dp must be an integer >= 1, got {dp!r}")
    g, pg = a.graph, a.points
    net = network_of({d for info in g.trace.ranks for d in info.devices}, net_gbps, net_latency_us)
    members = gradient_members(a)
    if not len(members):
        raise ConfigError("data_parallel: the trace has no gradient collectives (no data-parallel "
                          "all-reduce, reduce-scatter or all-gather) to fit and rescale")
    current = current_degree(a, members)
    layout = trace_layout(a, members, current, int(dp))
    node_scale = np.ones(len(g), dtype=np.float64)
    order = ("Megatron order: tensor-parallel ranks adjacent" if layout.megatron else
             "the traced groups' order is not Megatron's: a new group spans as many nodes as it can")
    notes = [f"data-parallel degree {current} → {dp}, read from the group size of {len(members)} gradient "
             f"collective ops: the job goes from {layout.world} to {layout.new_world} ranks, {GPUS_PER_NODE} GPUs a "
             f"node ({order}); a ring inside one node keeps the traced interconnect"]
    factor = current / dp if keep_global_batch else 1.0
    rings, modelled = rescale_rings(a, members, layout, net, factor, node_scale)
    notes += rings
    if any(g.collectives.kind[i] == "reducescatter" for i in g.collective[members]):
        # ZeRO-1: each rank updates 1/dp of the parameters
        node_scale[_launched_under(a, "Optimizer.step") & np.isin(g.kind, _GPU)] *= current / dp
        notes.append(f"gradients are reduce-scattered (ZeRO-1): optimizer GPU work scales by {current}/{dp}")
    if keep_global_batch:
        notes.append(_scale_per_sample(a, modelled, factor, node_scale))
    else:
        notes.append("per-rank batch kept: compute, data loading and model-parallel transfers stay as traced")
    notes.append("compute slowed by overlapping communication keeps its traced slowdown")
    scale = np.ones(len(pg.weight), dtype=np.float64)
    hit = own_time(a.points) & (node_scale != 1.0)[np.maximum(a.points.owner, 0)]
    scale[hit] = node_scale[pg.owner[hit]]
    return Rescaled(weight_scale=scale, assumptions=tuple(notes))


def pipeline_microbatches(a: Analysis) -> int:
    """Micro-batches per step of the traced pipeline job (the most common count over its steps).

    Raises:
        ConfigError: no pipeline stages, or an interleaved schedule.
    """
    counts = [s.microbatches for s in measure_steps(a)[0]]
    return int(np.bincount(counts).argmax())


def microbatches(a: Analysis, k: int, keep_global_batch: bool = True) -> Rescheduled:
    """Predicted step times of the traced pipeline job run 1F1B with ``k`` micro-batches per step.

    Each pipeline rank's step is measured from the trace: its forward and backward units (GPU
    busy time, the gaps inside them, CPU launch time), the lag each receive adds, and its work
    before the first and after the last unit. The 1F1B schedule is then re-instantiated with
    ``k`` micro-batches and its times computed exactly: F(s, m) after F(s-1, m) plus the
    transfer, B(s, m) after B(s+1, m) plus the transfer, each stage in 1F1B order; consecutive
    steps follow each other as the traced ones did.

    Args:
        a (Analysis): the traced pipeline job (non-interleaved 1F1B).
        k (int): micro-batches per step (>= 1).
        keep_global_batch (bool): split the same batch into ``k`` micro-batches (each one's GPU
            work and transfers scale by traced/``k``); else keep their size, so a step does
            ``k``/traced times the work.

    Returns:
        Rescheduled: step number → predicted ms of its slowest rank, and the assumptions.

    Raises:
        ConfigError: ``k`` < 1, no pipeline stages, or an interleaved schedule.
    """
    if not (isinstance(k, (int, np.integer)) and k >= 1):
        raise ConfigError(f"microbatches: k must be an integer >= 1, got {k!r}")
    measured, links = measure_steps(a)
    by_step: dict[int, dict[int, StageStep]] = {}
    for s in measured:
        by_step.setdefault(s.step, {})[s.rank] = s
    completion: dict[int, float] = {}
    step_ms: dict[int, float] = {}
    for step in sorted(by_step):
        steps = by_step[step]
        start = {r: completion.get(r, float(s.window_ns)) for r, s in steps.items()}
        completion = run_step(steps, links, start, int(k), keep_global_batch)
        step_ms[step] = max(completion[r] - start[r] for r in steps) / 1e6
    old = "/".join(map(str, sorted({s.microbatches for s in measured})))
    _, depth = pipeline_depths(links)
    notes = [f"non-interleaved 1F1B over {max(depth.values())} stages, {old} → {k} micro-batches per step; each "
             "stage's forward and backward are the mean of its traced micro-batches in that step",
             "work outside the micro-batches (data loading, optimizer, gradient reduction, the final sync) "
             "keeps its traced time"]
    on_cpu = any(s.on_cpu for s in measured)
    notes += _CPU_NOTES if on_cpu else _GPU_NOTES
    if keep_global_batch:
        what = ("each op's time beyond the least time of its name" if on_cpu else
                "GPU busy time (kernels, copies, blocking collectives) and p2p transfers")
        fixed = ("the least times and the Python between ops" if on_cpu else
                 "the GPU's own gaps between kernels and the CPU's launch time")
        notes.append(f"global batch kept: {what} of a micro-batch scale by {old}/{k}; {fixed} stay "
                     "(the fixed per-micro-batch overhead, from the trace)")
    else:
        notes.append(f"micro-batch size kept: a step does {k}/{old} times the work")
    return Rescheduled(step_ms=step_ms, assumptions=tuple(notes))
