"""One rank's training step as nodes: data loading, the pipeline schedule of forward and backward passes
(TP all-reduces, DDP gradient buckets, pipeline sends and receives), the optimizer, the loss sync,
and the injected faults.

The main thread runs the forwards and waits in ``loss.backward()`` while the autograd thread
runs each backward; the CPU runs ahead of the GPU until ``loss.item()`` blocks at the end.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from bottleneck_oracle.synth.config import SynthConfig
from bottleneck_oracle.synth.job import Job, Tuning
from bottleneck_oracle.synth.model import Op, TpAllReduce
from bottleneck_oracle.synth.ops import (
    copy_template,
    cpu_template,
    launches_template,
    sync_template,
)
from bottleneck_oracle.synth.pipeline import Unit, unit_order
from bottleneck_oracle.synth.program import Graph, Lane, Program
from bottleneck_oracle.synth.rank_builder import RankBuilder
from bottleneck_oracle.synth.topology import COMPUTE_STREAM

__all__ = ["build_program", "host_sync_count"]

MAIN, AUTOGRAD = Lane.MAIN, Lane.AUTOGRAD
BOUNDARY_NS = 40_000  # inside prof.step() between two steps
FETCH_NS = 700_000  # the DataLoader's Python around the collate
COLLATE_NS = 300_000
DATALOADER = "enumerate(DataLoader)#_SingleProcessDataLoaderIter.__next__"
HOST_SYNC_UNIT_NS = 30_000  # GPU time one mid-forward .item() costs: the drain and the relaunch (measured ~28-32 µs)


@dataclass(slots=True)
class _Step:
    """What one step of one rank is building."""

    faults: dict[str, float]  # category → size of the injections on this rank and step
    forward_nodes: dict[tuple[int, int, int, str], int] = field(default_factory=dict)
    syncs: int = 0  # injected .item() calls spread evenly over the step's forward ops
    sync_slots: int = 1
    forward_ops: int = 0


def host_sync_count(size_ms: float) -> int:
    """Mid-forward ``.item()`` calls a ``host_sync`` injection of ``size_ms`` makes."""
    return max(1, round(size_ms * 1e6 / HOST_SYNC_UNIT_NS))


def _stage_info(job: Job, rank: int) -> tuple[int, int]:
    c = job.config
    return c.stage_of(rank), c.dp * c.tp


def _neighbour(job: Job, rank: int, unit: Unit, toward_next: bool) -> int | None:
    """The rank on the other side of this unit's activation hop (None at the ends of the model)."""
    c = job.config
    stage, width = _stage_info(job, rank)
    if toward_next:
        if stage == c.pp - 1 and unit.chunk == c.virtual_stages - 1:
            return None
        return rank + width if stage < c.pp - 1 else rank - (c.pp - 1) * width
    if stage == 0 and unit.chunk == 0:
        return None
    return rank - width if stage > 0 else rank + (c.pp - 1) * width


def _run_ops(b: RankBuilder, lane: int, ops: tuple[Op | TpAllReduce, ...], key: tuple[int, int, int],
             st: _Step, backward: bool) -> None:
    job = b.job
    for op in ops:
        if isinstance(op, TpAllReduce):
            b.collective(lane, "allreduce", job.topology.tp[b.rank], op.nelems, blocking=True)
            continue
        link = st.forward_nodes.get((*key, op.autograd), -1) if backward else -1
        node = b.compute(lane, job.op(op, backward), tuple(leaf.kernel for leaf in op.leaves), link=link)
        if not backward:
            st.forward_nodes[(*key, op.key)] = node
            _after_forward_op(b, st)


def _after_forward_op(b: RankBuilder, st: _Step) -> None:
    """Injected host syncs and host pause land between forward ops."""
    i = st.forward_ops = st.forward_ops + 1
    here = min(i, st.sync_slots) * st.syncs // st.sync_slots - min(i - 1, st.sync_slots) * st.syncs // st.sync_slots
    if here:
        b.injecting = True
        for _ in range(here):
            b.copy(MAIN, _item_template(b.job), "Memcpy DtoH (Device -> Pageable)", 4)
        b.injecting = False
    pause = st.faults.get("host_pause")
    if pause is not None and st.forward_ops == max(1, len(b.job.layer_fwd) // 2):
        b.injecting = True
        b.gap(MAIN, round(pause * 1e6))
        b.injecting = False


def _item_template(job: Job) -> int:
    return job.template(("item",), lambda: copy_template(("aten::item", "aten::_local_scalar_dense"), job.hw, True))


def _forward(b: RankBuilder, unit: Unit, st: _Step, first_send: list[bool]) -> None:
    job, c = b.job, b.job.config
    stage, _ = _stage_info(job, b.rank)
    src = _neighbour(job, b.rank, unit, toward_next=False)
    if src is not None:
        b.collective(MAIN, "recv", job.topology.forward[(src, b.rank)], job.activation_nelems, blocking=True)
    b.open(MAIN, "## forward ##")
    key = (unit.chunk, unit.microbatch, -1)
    if src is None:
        _run_ops(b, MAIN, (job.embed_fwd,), key, st, backward=False)
    first_layer = (unit.chunk * c.pp + stage) * job.layers_per_chunk
    for layer in range(first_layer, first_layer + job.layers_per_chunk):
        _run_ops(b, MAIN, job.layer_fwd, (unit.chunk, unit.microbatch, layer), st, backward=False)
    dst = _neighbour(job, b.rank, unit, toward_next=True)
    if dst is None:
        _run_ops(b, MAIN, job.head_fwd, key, st, backward=False)
    b.close(MAIN)
    if dst is not None:
        bubble = st.faults.get("pipeline_bubble")
        extra = round(bubble * 1e6) if bubble is not None and first_send[0] else 0
        first_send[0] = False
        b.collective(MAIN, "send", job.topology.forward[(b.rank, dst)], job.activation_nelems,
                     blocking=False, extra_ns=extra)


class _Buckets:
    """DDP gradient buckets: a reduction is launched whenever ``bucket_mb`` of gradients are ready."""

    def __init__(self, b: RankBuilder, active: bool) -> None:
        self.b, self.active, self.pending = b, active, 0
        self.limit = round(b.job.config.bucket_mb * 1e6 / 2)

    def ready(self, params: int, flush: bool = False) -> None:
        """``params`` more gradients are ready; reduce the bucket when full (or when flushing)."""
        self.pending += params
        if self.active and self.pending and (self.pending >= self.limit or flush):
            job = self.b.job
            kind = "reducescatter" if job.config.distributed_optimizer else "allreduce"
            out = -(-self.pending // job.config.dp) if kind == "reducescatter" else None
            self.b.collective(AUTOGRAD, kind, job.topology.dp[self.b.rank], self.pending, blocking=False,
                              out_nelems=out)
            self.pending = 0


def _backward_passes(b: RankBuilder, unit: Unit, st: _Step, reduce: bool) -> None:
    """The autograd thread's part of one backward: ops in reverse, TP all-reduces and DDP buckets."""
    job, c = b.job, b.job.config
    stage, _ = _stage_info(job, b.rank)
    buckets = _Buckets(b, reduce and c.dp > 1)
    key = (unit.chunk, unit.microbatch, -1)
    if _neighbour(job, b.rank, unit, toward_next=True) is None:
        _run_ops(b, AUTOGRAD, job.head_bwd, key, st, backward=True)
        buckets.ready(job.head_params)
    first_layer = (unit.chunk * c.pp + stage) * job.layers_per_chunk
    for layer in reversed(range(first_layer, first_layer + job.layers_per_chunk)):
        _run_ops(b, AUTOGRAD, job.layer_bwd, (unit.chunk, unit.microbatch, layer), st, backward=True)
        buckets.ready(job.layer_params)
    if _neighbour(job, b.rank, unit, toward_next=False) is None:
        _run_ops(b, AUTOGRAD, (job.embed_bwd,), key, st, backward=True)
        buckets.ready(job.embed_params)
    buckets.ready(0, flush=True)


def _backward(b: RankBuilder, unit: Unit, st: _Step, reduce: bool, finalize: bool) -> None:
    job = b.job
    src = _neighbour(job, b.rank, unit, toward_next=True)
    if src is not None:
        b.collective(MAIN, "recv", job.topology.backward[(src, b.rank)], job.activation_nelems, blocking=True)
    gate = b.open(MAIN, "## backward ##")
    if src is None:  # loss.backward() seeds the gradient with ones_like before the engine takes over
        gate = b.compute(MAIN, job.op(job.loss_grad, False), tuple(leaf.kernel for leaf in job.loss_grad.leaves))
    b.hand_off(gate, AUTOGRAD)
    _backward_passes(b, unit, st, reduce)
    if finalize and job.config.dp > 1:
        b.wait_for(AUTOGRAD, job.topology.dp[b.rank])
    b.wait_until(MAIN, b.last[AUTOGRAD])
    b.close(MAIN)
    dst = _neighbour(job, b.rank, unit, toward_next=False)
    if dst is not None:
        b.collective(MAIN, "send", job.topology.backward[(b.rank, dst)], job.activation_nelems, blocking=False)


def _data(b: RankBuilder, st: _Step) -> None:
    job = b.job
    b.open(MAIN, DATALOADER)
    b.cpu(MAIN, job.template(("collate",), lambda: cpu_template("aten::stack", COLLATE_NS)))
    b.gap(MAIN, FETCH_NS)
    stall = st.faults.get("dataloader_stall")
    if stall is not None:
        b.injecting = True
        b.gap(MAIN, round(stall * 1e6))
        b.injecting = False
    b.close(MAIN)
    to = job.template(("to",), lambda: copy_template(("aten::to", "aten::_to_copy", "aten::copy_"), job.hw))
    nbytes = 2 * 8 * job.config.microbatches * job.shard.tokens  # int64 tokens and labels
    b.copy(MAIN, to, "Memcpy HtoD (Pinned -> Device)", nbytes)


def _optimizer(b: RankBuilder) -> None:
    job = b.job
    stage, _ = _stage_info(job, b.rank)
    b.open(MAIN, "Optimizer.step#AdamW.step")
    for name, kernel, launches in job.optimizer_ops[stage]:
        tref = job.template(("foreach", name, launches), lambda: launches_template(name, launches, job.hw))
        b.compute(MAIN, tref, (kernel,) * launches)
    b.close(MAIN)
    if job.config.distributed_optimizer and job.config.dp > 1:
        params = sum(job.chunk_params(stage, ch) for ch in range(job.config.virtual_stages))
        b.collective(MAIN, "allgather", job.topology.dp[b.rank], params, blocking=True,
                     out_nelems=params)


def _checkpoint(b: RankBuilder, size_mb: float) -> None:
    job = b.job
    b.injecting = True
    b.open(MAIN, "checkpoint_save")
    b.cpu(MAIN, job.template(("device_sync",), lambda: sync_template(job.hw)))
    to = job.template(("to_host",), lambda: copy_template(("aten::to", "aten::_to_copy", "aten::copy_"), job.hw, True))
    b.copy(MAIN, to, "Memcpy DtoH (Device -> Pinned)", round(size_mb * 1e6))
    b.gap(MAIN, round(size_mb * 1e6 / job.hw.disk_bytes_per_s * 1e9))
    b.close(MAIN)
    b.injecting = False


def _plan_host_syncs(b: RankBuilder, st: _Step, units: tuple[Unit, ...]) -> None:
    fault = st.faults.get("host_sync")
    if fault is None:
        return
    per_unit = len([op for op in b.job.layer_fwd if isinstance(op, Op)]) * b.job.layers_per_chunk
    st.sync_slots = max(1, per_unit * sum(u.forward for u in units))
    st.syncs = host_sync_count(fault)


def _step(b: RankBuilder, index: int, number: int, faults: dict[str, float]) -> None:
    job, c = b.job, b.job.config
    st = _Step(faults)
    b.begin_step(index)
    b.cpu_factor = faults.get("launch_overhead", 1.0)
    b.gpu_factor = faults.get("slow_compute", 1.0)
    b.gap(MAIN, BOUNDARY_NS)
    step_open = b.open(MAIN, f"ProfilerStep#{number}")
    if "straggler_rank" in faults:
        b.injecting = True
        b.gap(MAIN, round(faults["straggler_rank"] * 1e6))
        b.injecting = False
    _data(b, st)
    b.open(MAIN, "Optimizer.zero_grad#AdamW.zero_grad")
    b.close(MAIN)
    stage, _ = _stage_info(job, b.rank)
    units = unit_order(c.pp, stage, c.microbatches, c.virtual_stages)
    _plan_host_syncs(b, st, units)
    last_backward = {u.chunk: i for i, u in enumerate(units) if not u.forward}
    final = max(last_backward.values())
    first_send = [True]
    for i, unit in enumerate(units):
        if unit.forward:
            _forward(b, unit, st, first_send)
        else:
            _backward(b, unit, st, reduce=last_backward[unit.chunk] == i, finalize=i == final)
    if "exposed_communication" in faults:
        b.injecting = True
        nelems = round(faults["exposed_communication"] * 1e6 / 2)  # bf16 elements of SIZE MB
        b.collective(MAIN, "allreduce", job.topology.world, nelems, blocking=True)
        b.injecting = False
    _optimizer(b)
    if "checkpoint_stall" in faults:
        _checkpoint(b, faults["checkpoint_stall"])
    b.copy(MAIN, _item_template(job), "Memcpy DtoH (Device -> Pageable)", 4)
    b.g.step_marks.append((b.rank, index, step_open, b.close(MAIN)))


def build_program(config: SynthConfig, tuning: Tuning | None = None) -> tuple[Program, Job]:
    """Every rank's every recorded step as one graph.

    Args:
        config: the job.
        tuning: what-if speed-ups (default: none).

    Returns:
        The frozen graph and the job tables it refers to.
    """
    job = Job(config, tuning or Tuning())
    c = job.config
    graph = Graph()
    faults: dict[tuple[int, int], dict[str, float]] = {}
    for injection in c.resolved_injections():
        for r in injection.ranks:
            faults.setdefault((r, injection.step), {})[injection.category] = float(injection.size or 0.0)
    for rank in range(c.ranks):
        b = RankBuilder(graph, job, rank)
        for index, number in enumerate(c.recorded_steps):
            _step(b, index, number, faults.get((rank, number), {}))
        b.gap(MAIN, BOUNDARY_NS)
        assert not b.lane_deps.get(COMPUTE_STREAM), "a stream wait was left pending"
    graph.close_collectives([len(g.ranks) for g in job.topology.groups])
    return graph.freeze(), job
