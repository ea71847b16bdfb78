"""Synthetic op-level timelines of Megatron-style pipeline-parallel training jobs with injected stragglers.

The table has the columns of the StragglerAnalysis traces (one row per op of the recorded worker of each
(dp_rank, stage) pair) and every op starts after the ends of the ops it depends on, by the dependency model of
that paper's what-if simulator (plus forward-recv_0 after params-all-gather, as in every step of the real
tables), so a replay of the table reproduces it. `StragglerCause` names the truth `generate` returns with it.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from graphlib import TopologicalSorter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import yaml

from bottleneck_oracle.errors import ConfigError

__all__ = ["StragglerCause", "StragglerJobSpec", "generate", "write_job"]

FIRST_STEP = 16  # the real traces skip the warm-up steps too: their first recorded step is 16 or 23
STEP_GAP_S = 0.05  # host time between one step's last optimizer and the next step's first op
GAP_MIN_S = 1e-6  # every op starts at least this long after what it waits for: float rounding never breaks an order
GAP_MEAN_S = 2e-5  # mean launch delay on top of GAP_MIN_S (exponential)
GC_S = 2e-5
LAYERNORM_S = 5e-5
CLIP_S = 1e-3
OPTYPES = ("forward-compute", "backward-compute", "forward-send", "forward-recv", "backward-send", "backward-recv",
           "params-all-gather", "grads-reduce-scatter", "gc", "layernorm-grads-all-reduce",
           "embedding-grads-all-reduce", "optimizer-clip-main-grad", "optimizer")
_COMPUTE = frozenset({"forward-compute", "backward-compute"})
_PLAIN = _COMPUTE | {"gc", "layernorm-grads-all-reduce", "optimizer"}  # end = start + own duration
_DP_SYNCED = frozenset({"params-all-gather", "grads-reduce-scatter", "optimizer-clip-main-grad"})
_MC_ZERO = _COMPUTE | {"params-all-gather", "grads-reduce-scatter"}  # the real tables give these mc 0, others -1


class StragglerCause(StrEnum):
    """What the ground truth says slows a synthetic job down."""

    SLOW_WORKER = "slow_worker"
    STAGE_IMBALANCE = "stage_imbalance"
    UNEVEN_MICROBATCHES = "uneven_microbatches"
    NONE = "none"


def _is_int(value: object, least: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= least


def _is_real(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _as_tuples(name: str, items: object, width: int) -> tuple[tuple, ...]:
    if not isinstance(items, (tuple, list)) or not all(isinstance(x, (tuple, list)) and len(x) == width
                                                       for x in items):
        raise ConfigError(f"StragglerJobSpec: {name} must be a tuple of {width}-tuples, got {items!r}")
    return tuple(tuple(x) for x in items)


@dataclass(frozen=True, slots=True)
class StragglerJobSpec:
    """One synthetic job: layout, base op times, noise and the stragglers injected.

    Args:
        dp (int): data-parallel size.
        pp (int): pipeline-parallel size (stages).
        tp (int): tensor-parallel size; only the first TP rank of each (dp_rank, stage) is recorded. (default: 1)
        microbatches (int): microbatches per step (M). (default: 8)
        steps (int): steps recorded. (default: 10)
        seed (int): seed of every random draw; one seed gives one table. (default: 0)
        forward_s, backward_s (float): mean seconds of one microbatch's forward / backward compute on one stage.
        p2p_s (float): transfer seconds of one pipeline send/recv pair and of the embedding-grads all-reduce.
        dp_comm_s (float): transfer seconds of params-all-gather and of grads-reduce-scatter.
        optimizer_s (float): seconds of the optimizer step.
        noise (float): coefficient of variation of the lognormal noise on every op's time. (default: 0.02)
        slow_workers: (dp_rank, stage, factor) triples: that worker's compute takes factor times longer.
        slow_stages: (stage, factor) pairs: that stage's compute takes factor times longer on every dp rank.
        uneven_microbatches (float): coefficient of variation of each microbatch's work (its sequence lengths):
            microbatch k of one step and replica has one lognormal factor, on every stage, forward and backward.

    Raises:
        ConfigError: a size is not an integer >= 1, a time not > 0, a coefficient < 0, a factor < 1, or a
            straggler lies outside the layout or is named twice.
    """

    dp: int
    pp: int
    tp: int = 1
    microbatches: int = 8
    steps: int = 10
    seed: int = 0
    forward_s: float = 0.12
    backward_s: float = 0.24
    p2p_s: float = 0.004
    dp_comm_s: float = 0.08
    optimizer_s: float = 0.02
    noise: float = 0.02
    slow_workers: tuple[tuple[int, int, float], ...] = ()
    slow_stages: tuple[tuple[int, float], ...] = ()
    uneven_microbatches: float = 0.0

    def __post_init__(self) -> None:
        for name in ("dp", "pp", "tp", "microbatches", "steps", "seed"):
            if not _is_int(getattr(self, name), 0 if name == "seed" else 1):
                rule = ">= 0" if name == "seed" else ">= 1"
                raise ConfigError(f"StragglerJobSpec: {name} must be an integer {rule}, got {getattr(self, name)!r}")
        for name in ("forward_s", "backward_s", "p2p_s", "dp_comm_s", "optimizer_s", "noise", "uneven_microbatches"):
            value, is_time = getattr(self, name), name.endswith("_s")
            if not _is_real(value) or value < 0 or (is_time and value == 0):
                raise ConfigError(f"StragglerJobSpec: {name} must be a finite number {'> 0' if is_time else '>= 0'}, "
                                  f"got {value!r}")
        object.__setattr__(self, "slow_workers", _as_tuples("slow_workers", self.slow_workers, 3))
        object.__setattr__(self, "slow_stages", _as_tuples("slow_stages", self.slow_stages, 2))
        for i, (*where, factor) in enumerate(self.slow_workers + self.slow_stages):
            label = f"slow_workers[{i}]" if i < len(self.slow_workers) else f"slow_stages[{i - len(self.slow_workers)}]"
            sizes = (self.dp, self.pp)[-len(where):]
            if not all(_is_int(v, 0) and v < size for v, size in zip(where, sizes)):
                raise ConfigError(f"StragglerJobSpec: {label} names {tuple(where)!r}, outside dp {self.dp} "
                                  f"x pp {self.pp}")
            if not _is_real(factor) or factor < 1:
                raise ConfigError(f"StragglerJobSpec: {label}: factor must be a finite number >= 1, got {factor!r}")
        if len({w[:2] for w in self.slow_workers}) < len(self.slow_workers) or \
                len({s[0] for s in self.slow_stages}) < len(self.slow_stages):
            raise ConfigError("StragglerJobSpec: a worker or stage is named twice in slow_workers or slow_stages")


@dataclass(slots=True)
class _OpList:
    """The ops of one step on one replica (every stage), each with the ops it waits for, in build order."""

    rows: list[tuple[int, str, int, int, float]] = field(default_factory=list)  # stage, optype, seq_id, mb_id, base_s
    deps: list[list[int]] = field(default_factory=list)
    index: dict[tuple[int, str, int], int] = field(default_factory=dict)

    def add(self, stage: int, optype: str, seq_id: int, deps: list[int | None], base_s: float, mb_id: int = -1) -> int:
        self.index[(stage, optype, seq_id)] = len(self.rows)
        self.rows.append((stage, optype, seq_id, mb_id, base_s))
        self.deps.append([d for d in deps if d is not None])
        return len(self.rows) - 1


@dataclass(frozen=True, slots=True)
class _Template:
    """The op template of one step and replica: per-op attributes (arrays of length n_ops) and the comm groups
    (members, is_comm, dp_synced) in an order where every group comes after the groups it waits for."""

    stage: np.ndarray
    optype: np.ndarray  # index into OPTYPES
    seq_id: np.ndarray
    mb_id: np.ndarray
    base_s: np.ndarray
    deps: list[list[int]]
    groups: list[tuple[tuple[int, ...], bool, bool]]


def _one_f_one_b(pp: int, stage: int, microbatches: int) -> list[tuple[bool, int]]:
    """(is_forward, microbatch) of one stage's computes in 1F1B order."""
    warmup = min(pp - stage - 1, microbatches)
    order = [(True, k) for k in range(warmup)]
    for k in range(microbatches - warmup):
        order += [(True, warmup + k), (False, k)]
    return order + [(False, k) for k in range(microbatches - warmup, microbatches)]


def _add_stage(ops: _OpList, spec: StragglerJobSpec, stage: int) -> None:
    """Add one stage's ops with the dependencies of rules 1-5 and 8 (see `generate`)."""
    last = spec.pp - 1
    gather = ops.add(stage, "params-all-gather", 0, [], spec.dp_comm_s) if spec.dp > 1 else None
    order = _one_f_one_b(spec.pp, stage, spec.microbatches)
    first_b = order.index((False, 0))
    prev = None
    for is_forward, k in order:
        kind, send, recv = ("forward", "forward-send", "forward-recv") if is_forward else \
            ("backward", "backward-send", "backward-recv")
        prior = ops.index.get((stage, f"{kind}-compute", k - 1))
        early = None  # the first backward send/recv also waits for the compute two places before B_0
        if not is_forward and k == 0 and first_b >= 2:
            fwd, mb = order[first_b - 2]
            early = ops.index.get((stage, "forward-compute" if fwd else "backward-compute", mb))
        has_recv = stage > 0 if is_forward else stage < last
        waits = [prior, ops.index.get((stage, recv, k - 1)), early, gather if is_forward and k == 0 else None]
        got = ops.add(stage, recv, k, waits, spec.p2p_s) if has_recv else None
        base_s = spec.forward_s if is_forward else spec.backward_s
        first = gather if is_forward and k == 0 else None
        prev = ops.add(stage, f"{kind}-compute", k, [got, prev, first], base_s, mb_id=k)
        if (stage < last if is_forward else stage > 0):
            ops.add(stage, send, k, [prev, ops.index.get((stage, send, k - 1)), early], spec.p2p_s)
    tail = ops.add(stage, "gc", 0, [prev], GC_S, mb_id=0)
    tail = ops.add(stage, "layernorm-grads-all-reduce", 0, [tail], LAYERNORM_S)
    if stage in (0, last):
        tail = ops.add(stage, "embedding-grads-all-reduce", 0, [tail], spec.p2p_s)
    if spec.dp > 1:
        tail = ops.add(stage, "grads-reduce-scatter", 0, [tail, gather], spec.dp_comm_s)
    tail = ops.add(stage, "optimizer-clip-main-grad", 0, [tail], CLIP_S)
    ops.add(stage, "optimizer", 0, [tail], spec.optimizer_s)


def _groups(ops: _OpList) -> list[tuple[tuple[int, ...], bool, bool]]:
    """Plain ops alone, p2p sends with their peer recv, the embedding pair, the clip of every stage together."""
    groups, embedding, clip = [], [], []
    for i, (stage, optype, seq_id, _, _) in enumerate(ops.rows):
        if optype in ("forward-send", "backward-send"):
            peer = (stage + 1, "forward-recv") if optype == "forward-send" else (stage - 1, "backward-recv")
            groups.append(((i, ops.index[(*peer, seq_id)]), True, False))
        elif optype == "embedding-grads-all-reduce":
            embedding.append(i)
        elif optype == "optimizer-clip-main-grad":
            clip.append(i)
        elif optype not in ("forward-recv", "backward-recv"):
            groups.append(((i,), optype not in _PLAIN, optype in _DP_SYNCED))
    return groups + [(tuple(embedding), True, False), (tuple(clip), True, True)]


def _topological(groups: list[tuple[tuple[int, ...], bool, bool]], deps: list[list[int]], n_ops: int
                 ) -> list[tuple[tuple[int, ...], bool, bool]]:
    """The groups in an order where each comes after every group its members wait for."""
    group_of = np.empty(n_ops, dtype=np.int64)
    for g, (members, _, _) in enumerate(groups):
        group_of[list(members)] = g
    waits = {g: {int(group_of[d]) for i in members for d in deps[i]} - {g} for g, (members, _, _) in enumerate(groups)}
    return [groups[g] for g in TopologicalSorter(waits).static_order()]  # raises CycleError on a template bug


def _build_template(spec: StragglerJobSpec) -> _Template:
    ops = _OpList()
    for stage in range(spec.pp):
        _add_stage(ops, spec, stage)
    stage, optype, seq_id, mb_id, base_s = zip(*ops.rows)
    return _Template(stage=np.array(stage), optype=np.array([OPTYPES.index(o) for o in optype], dtype=np.int8),
                     seq_id=np.array(seq_id), mb_id=np.array(mb_id), base_s=np.array(base_s, dtype=np.float64),
                     deps=ops.deps, groups=_topological(_groups(ops), ops.deps, len(ops.rows)))


def _lognormal(normal: np.ndarray, cv: float) -> np.ndarray:
    """Lognormal factors of mean 1 and coefficient of variation cv from standard normal draws."""
    sigma = math.sqrt(math.log1p(cv * cv))
    return np.exp(normal * sigma - sigma * sigma / 2)


def _durations(template: _Template, spec: StragglerJobSpec, draws: dict[str, np.ndarray], injected: set[str]
               ) -> np.ndarray:
    """Seconds of each op (or transfer of each comm op) with the injections named; shape (n_ops, steps, dp)."""
    dur = template.base_s[:, None, None] * _lognormal(draws["noise"], spec.noise)
    synced = np.isin(template.optype, [OPTYPES.index(o) for o in _DP_SYNCED])
    dur[synced] = dur[synced][:, :, :1]  # one transfer for the whole dp group
    compute = np.isin(template.optype, [0, 1])
    worker = np.ones((spec.pp, spec.dp))
    if StragglerCause.SLOW_WORKER in injected:
        for dp_rank, stage, factor in spec.slow_workers:
            worker[stage, dp_rank] *= factor
    if StragglerCause.STAGE_IMBALANCE in injected:
        for stage, factor in spec.slow_stages:
            worker[stage] *= factor
    factor = worker[template.stage[compute]][:, None, :]
    if StragglerCause.UNEVEN_MICROBATCHES in injected:
        factor = factor * _lognormal(draws["microbatch"], spec.uneven_microbatches)[template.mb_id[compute]]
    dur[compute] *= factor
    return dur


def _simulate(template: _Template, dur: np.ndarray, gaps: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Start and end seconds of every op from its step's start, shape (n_ops, steps, dp): rules 1-8."""
    starts, ends = np.empty_like(dur), np.empty_like(dur)
    for members, is_comm, dp_synced in template.groups:
        for i in members:
            deps = template.deps[i]
            ready = ends[deps[0]] if len(deps) == 1 else ends[deps].max(axis=0) if deps else 0.0
            starts[i] = ready + gaps[i]
        if not is_comm:
            ends[members[0]] = starts[members[0]] + dur[members[0]]
            continue
        meet = starts[members[0]] if len(members) == 1 else starts[list(members)].max(axis=0)
        if dp_synced:
            meet = meet.max(axis=1, keepdims=True)
        ends[list(members)] = meet + dur[members[0]]  # the earlier starters wait inside their op
    return starts, ends


def _injected(spec: StragglerJobSpec) -> list[StragglerCause]:
    named = [(StragglerCause.SLOW_WORKER, any(f > 1 for _, _, f in spec.slow_workers)),
             (StragglerCause.STAGE_IMBALANCE, any(f > 1 for _, f in spec.slow_stages)),
             (StragglerCause.UNEVEN_MICROBATCHES, spec.uneven_microbatches > 0)]
    return [cause for cause, is_on in named if is_on]


def _truth(spec: StragglerJobSpec, template: _Template, draws: dict[str, np.ndarray], step_s: np.ndarray) -> dict:
    """The ground truth; with several injections the cause is the one that alone adds most to the mean step."""
    injected = _injected(spec)
    effects = {}
    if len(injected) > 1:
        clean = _simulate(template, _durations(template, spec, draws, set()), draws["gap"])[1].max(axis=(0, 2))
        for cause in injected:
            alone = _simulate(template, _durations(template, spec, draws, {cause}), draws["gap"])[1]
            effects[str(cause)] = float((alone.max(axis=(0, 2)) - clean).mean())
    cause = max(injected, key=lambda c: effects.get(str(c), 0.0)) if injected else StragglerCause.NONE
    return {"cause": str(cause), "slow_workers": [[d, s] for d, s, f in spec.slow_workers if f > 1],
            "slow_stages": [s for s, f in spec.slow_stages if f > 1], "effects_s": effects,
            "mean_step_s": float(step_s.mean()), "spec": json.loads(json.dumps(asdict(spec)))}


def _table(spec: StragglerJobSpec, template: _Template, starts: np.ndarray, ends: np.ndarray) -> pa.Table:
    """The rows ordered by dp_rank, stage, step, optype name and seq_id, as in the real tables."""
    n_ops, steps, dp = starts.shape
    # on a whole-nanosecond grid: a reader that converts to integer ns gets peers' ends exactly equal
    start_ns, end_ns = np.rint(starts * 1e9).astype(np.int64), np.rint(ends * 1e9).astype(np.int64)
    step_start_ns = np.concatenate([[0], np.cumsum(end_ns.max(axis=(0, 2)) + round(STEP_GAP_S * 1e9))[:-1]])
    name_rank = np.argsort(np.argsort(np.array(OPTYPES)))[template.optype]
    position = np.empty(n_ops, dtype=np.int64)
    position[np.lexsort((template.seq_id, name_rank, template.stage))] = np.arange(n_ops)
    op, step, dp_rank = (a.ravel() for a in np.meshgrid(np.arange(n_ops), np.arange(steps), np.arange(dp),
                                                          indexing="ij"))
    stage = template.stage[op]
    row = np.argsort(((dp_rank * spec.pp + stage) * steps + step) * n_ops + position[op])
    op, step, dp_rank, stage = op[row], step[row], dp_rank[row], stage[row]
    optype, int32 = template.optype[op], pa.int32()
    columns = {
        "dp_rank": pa.array(dp_rank, int32), "stage": pa.array(stage, int32),
        "rank": pa.array((stage * spec.dp + dp_rank) * spec.tp, int32), "step": pa.array(step + FIRST_STEP, pa.int64()),
        "optype": pa.DictionaryArray.from_arrays(pa.array(optype, pa.int8()), pa.array(OPTYPES)),
        "start_ts": pa.array((start_ns.ravel()[row] + step_start_ns[step]) / 1e9),
        "duration": pa.array((end_ns - start_ns).ravel()[row] / 1e9), "seq_id": pa.array(template.seq_id[op], int32),
        "mc": pa.array(np.where(np.isin(optype, [OPTYPES.index(o) for o in _MC_ZERO]), 0, -1), int32),
        "mb_id": pa.array(template.mb_id[op], int32), "gmc": pa.array(np.where(optype <= 1, stage, -1), int32),
    }
    return pa.table(columns)


def generate(spec: StragglerJobSpec) -> tuple[pa.Table, dict, dict]:
    """Generate the op timeline of a job, its meta and its ground truth.

    Every op starts at least `GAP_MIN_S` (plus an exponential launch delay) after the end of each op it depends
    on, per step and worker; F_k/B_k are microbatch k's forward/backward compute, in 1F1B order:
    1. computes one at a time; 2. forward-recv_k after F_{k-1} (k=0: after params-all-gather), F_k after it;
    3. forward-send_k after F_k; 4. backward-recv_k after B_{k-1} (k=0: after the compute two places before B_0),
    B_k after it; 5. backward-send_k after B_k (k=0: also after that compute); each p2p optype one at a time;
    6. a send and its peer's recv end together at the later start plus the transfer; 7. params-all-gather ends
    together on every dp rank of a stage; 8. after the last compute: gc, layernorm-grads-all-reduce, the
    embedding-grads-all-reduce pair of stages 0 and pp-1, grads-reduce-scatter (synchronized over dp, only when
    dp > 1), optimizer-clip-main-grad (synchronized over every worker), optimizer; 9. step t+1 starts
    `STEP_GAP_S` after the last optimizer of step t (the real tables restart each step at 0). Steps are
    numbered from `FIRST_STEP`.

    Columns: dp_rank, stage, rank, seq_id, mc, mb_id, gmc int32; step int64; optype dictionary string; start_ts,
    duration float64 seconds (whole ns). rank is the worker's first TP rank in Megatron's order (TP fastest,
    then DP, then PP), the rule of the real tables: rank = (stage * dp + dp_rank) * tp. mb_id is the microbatch
    of computes, 0 for gc and -1 elsewhere; gmc is the stage of computes, -1 elsewhere; mc is 0 for computes,
    params-all-gather and grads-reduce-scatter, -1 elsewhere (as the real tables have them).

    Args:
        spec (StragglerJobSpec): the job.

    Returns:
        The table; the meta (``meta.yaml``'s keys); the truth: ``cause`` (a `StragglerCause` value: the only
        one injected, or with several the one whose injection alone adds most to the mean step time, measured by
        re-timing the same random draws; ``effects_s`` holds those seconds), ``slow_workers`` ([dp_rank, stage]),
        ``slow_stages``, ``mean_step_s`` and ``spec``.

    Example:
        >>> table, meta, truth = generate(StragglerJobSpec(dp=2, pp=4, slow_workers=((1, 2, 1.5),)))
        >>> truth["cause"], meta["world_size"]
        ('slow_worker', 8)
    """
    template = _build_template(spec)
    rng = np.random.default_rng(spec.seed)
    shape = (len(template.stage), spec.steps, spec.dp)
    draws = {"noise": rng.standard_normal(shape), "gap": GAP_MIN_S + rng.exponential(GAP_MEAN_S, shape),
             "microbatch": rng.standard_normal((spec.microbatches, spec.steps, spec.dp))}
    durations = _durations(template, spec, draws, set(_injected(spec)))
    starts, ends = _simulate(template, durations, draws["gap"])
    meta = {"trial_name": f"synthetic-dp{spec.dp}-pp{spec.pp}-tp{spec.tp}-seed{spec.seed}", "run_id": 0,
            "dp_size": spec.dp, "pp_size": spec.pp, "tp_size": spec.tp, "dsp_size": 1, "vpp_size": 1,
            "world_size": spec.dp * spec.pp * spec.tp}
    return _table(spec, template, starts, ends), meta, _truth(spec, template, draws, ends.max(axis=(0, 2)))


def write_job(spec: StragglerJobSpec, folder: str | Path) -> Path:
    """Generate a job and write ``trace.parquet``, ``meta.yaml`` and ``truth.json`` into folder.

    Args:
        spec (StragglerJobSpec): the job.
        folder (str | Path): where to write; created if missing.

    Returns:
        The folder.
    """
    table, meta, truth = generate(spec)
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, folder / "trace.parquet")
    (folder / "meta.yaml").write_text(yaml.safe_dump(meta, sort_keys=False))
    (folder / "truth.json").write_text(json.dumps(truth, indent=2) + "\n")
    return folder
