"""The dependency model of a pipeline-parallel step, read off one replica's recorded step.

Every replica and every step of a Megatron job runs the same program, so the model is built once,
from the first step of replica 0, and replayed for all (``graph/pipeline/job_graph.py``). Per stage:

- computes run one at a time in their recorded order (1F1B, or interleaved with virtual stages);
- each kind of point-to-point op (forward/backward send/recv) is its own stream, in order;
- a send waits for the compute that produced its tensor, a compute for the receive that brings
  its input, and a receive is posted once the previous compute of its kind is done; the first
  backward send/receive is posted two computes before the first backward (Megatron posts it early);
- sends and receives pair across neighbouring stages (the k-th forward send of stage s with the
  k-th forward receive of s+1); ops recorded at the edges of a step that have no peer are no-ops;
- data-parallel collectives (params all-gather, grads reduce-scatter) are one stream; the all-gather
  of a model chunk gates its first forward, its reduce-scatter waits for its last backward when the
  job overlaps them (a separate grads all-reduce exists);
- after the last compute: gc, layernorm and embedding all-reduces, the gradient collectives, the
  gradient clip (a collective over every worker) and the optimizer, in that order.

Collective groups: a p2p pair; the embedding all-reduce of the first and last stage; the clip over all
stages; a data-parallel collective alone. A group marked ``all_replicas`` also waits for every replica.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from bottleneck_oracle.errors import TraceFormatError
from bottleneck_oracle.graph.types import EdgeType
from bottleneck_oracle.traces.op_table import OPCODE, OPTYPES, OpTable

__all__ = ["PipelineSchedule", "build_schedule"]

F, B = OPCODE["forward-compute"], OPCODE["backward-compute"]
P2P = {  # (is_forward, is_send) -> op code
    (True, True): OPCODE["forward-send"], (True, False): OPCODE["forward-recv"],
    (False, True): OPCODE["backward-send"], (False, False): OPCODE["backward-recv"],
}
PEER = {P2P[(f, s)]: (P2P[(f, not s)], (1 if s else -1) * (1 if f else -1)) for f, s in P2P}  # code -> (peer, stage+)
AG, RS, SEP = OPCODE["params-all-gather"], OPCODE["grads-reduce-scatter"], OPCODE["separate-grads-all-reduce"]
LN, EMB, CLIP, OPT, GC = (OPCODE[k] for k in ("layernorm-grads-all-reduce", "embedding-grads-all-reduce",
                                              "optimizer-clip-main-grad", "optimizer", "gc"))
EDGE_NS = 50_000  # 50 us: how early a p2p op may be recorded before the compute it serves (clock skew)
_ALPHA = np.argsort(np.argsort(np.array(OPTYPES)))  # the op types' alphabetical rank: the tie order of the recorder


@dataclass(frozen=True, slots=True)
class PipelineSchedule:
    """One replica's step as ops and dependencies; ops are indexed 0..J-1 by stage, then recorded order.

    Args:
        stage, optype, seq, mc, mb_id (np.ndarray): [J] each op's stage, op code, order within its type
            on its stage, model chunk and micro-batch (-1: none).
        dep_src, dep_dst (np.ndarray): [K] op ``dep_dst`` starts once op ``dep_src`` ended.
        dep_type (np.ndarray): int8[K] the ``EdgeType`` of each dependency (program order, a stream, data).
        group (np.ndarray): int64[J] each op's collective group (-1: it runs alone).
        all_replicas (np.ndarray): bool[G] groups that also wait for every data-parallel replica.
        noop (np.ndarray): bool[J] p2p ops recorded with no peer.
    """

    stage: np.ndarray
    optype: np.ndarray
    seq: np.ndarray
    mc: np.ndarray
    mb_id: np.ndarray
    dep_src: np.ndarray
    dep_dst: np.ndarray
    dep_type: np.ndarray
    group: np.ndarray
    all_replicas: np.ndarray
    noop: np.ndarray

    def __len__(self) -> int:
        return len(self.stage)


class _Builder:
    def __init__(self, sample: OpTable, pp: int, vpp: int, data_parallel: bool, overlap: bool) -> None:
        order = np.lexsort((_ALPHA[sample.optype], sample.seq_id, sample.start_ns, sample.stage))
        self.t = sample.take(order)
        self.pp, self.vpp, self.data_parallel, self.overlap = pp, vpp, data_parallel, overlap
        self.key = {(int(s), int(o), int(q)): j for j, (s, o, q) in
                    enumerate(zip(self.t.stage, self.t.optype, self.t.seq_id))}
        if len(self.key) != len(self.t):
            raise TraceFormatError(f"{sample.source}: two rows of one worker share an op type and seq_id in a step")
        self.deps: list[tuple[int, int, int]] = []
        self.groups: list[tuple[list[int], bool]] = []
        self.noop = np.zeros(len(self.t), dtype=bool)
        self.valid: dict[tuple[int, int], list[int]] = {}  # (stage, p2p code) -> its ops that have a peer, in order

    def op(self, stage: int, code: int, seq: int) -> int | None:
        return self.key.get((stage, code, seq))

    def of(self, stage: int, *codes: int) -> np.ndarray:
        """Ops of ``stage`` with these codes, in recorded order."""
        return np.flatnonzero((self.t.stage == stage) & np.isin(self.t.optype, codes))

    def chain(self, ops: list[int] | np.ndarray, after: list[int] = (), kind: int = EdgeType.THREAD_NEXT) -> None:
        last = list(after)
        for j in ops:
            self.deps += [(u, int(j), kind) for u in last]
            last = [int(j)]

    def build(self) -> PipelineSchedule:
        for s in range(self.pp):
            self.chain(self.of(s, F, B))
            for code in P2P.values():
                self.chain(self.of(s, code), kind=EdgeType.STREAM_NEXT)
            self._match_p2p(s)
            self._first_backward_exchange(s)
            if self.data_parallel:
                self.chain(self.of(s, AG, RS), kind=EdgeType.STREAM_NEXT)
                self._chunk_collectives(s)
            self._after_compute(s)
        self._collective_groups()
        t = self.t
        group = np.full(len(t), -1, dtype=np.int64)
        for g, (members, _) in enumerate(self.groups):
            group[members] = g
        deps = np.array(sorted(set(self.deps)), dtype=np.int64).reshape(-1, 3)
        return PipelineSchedule(
            stage=t.stage, optype=t.optype, seq=t.seq_id, mc=t.mc, mb_id=t.mb_id, dep_src=deps[:, 0],
            dep_dst=deps[:, 1], dep_type=deps[:, 2].astype(np.int8), group=group,
            all_replicas=np.array([a for _, a in self.groups], dtype=bool), noop=self.noop)

    def _match_p2p(self, s: int) -> None:
        """Each send/recv to the compute it serves; peers numbered by valid op, ``noop`` for the rest."""
        t = self.t
        for fwd in (True, False):
            comp = self.of(s, F if fwd else B)
            if not len(comp):
                continue
            last_start, first_end = t.start_ns[comp].max(), t.end_ns[comp].min()
            for send in (True, False):
                code = P2P[(fwd, send)]
                ops = self.of(s, code)
                live = (t.end_ns[ops] >= first_end - EDGE_NS) if send else (t.start_ns[ops] <= last_start + EDGE_NS)
                self.noop[ops[~live]] = True  # posted at the step's edge, never exchanged
                k = 1 if (not send and live.sum() + 1 == len(comp)) else 0  # the first stage's first recv unrecorded
                for j in ops[live]:
                    if k >= len(comp):
                        raise TraceFormatError(f"{t.source}: stage {s} records more {OPTYPES[code]} ops "
                                               f"than {OPTYPES[F if fwd else B]} ops in a step")
                    served = int(comp[k])
                    peer_chunk = t.gmc[served] + (1 if send else -1) * (1 if fwd else -1)
                    self.noop[j] = not 0 <= peer_chunk < self.pp * self.vpp  # nothing beyond the model's ends
                    if send:  # the compute made the tensor it sends
                        self.deps.append((served, int(j), EdgeType.DATA))
                    else:  # the tensor it brings feeds the compute; posted once the previous compute is done
                        self.deps.append((int(j), served, EdgeType.DATA))
                        if k > 0:
                            self.deps.append((int(comp[k - 1]), int(j), EdgeType.THREAD_NEXT))
                    k += 1
            for send in (True, False):
                code = P2P[(fwd, send)]
                self.valid[(s, code)] = [int(j) for j in self.of(s, code) if not self.noop[j]]

    def _first_backward_exchange(self, s: int) -> None:
        comp = self.of(s, F, B)
        first = np.flatnonzero(self.t.optype[comp] == B)
        if not len(first) or first[0] < 2 or (self.t.optype[comp[first[0] - 2: first[0]]] != F).any():
            return
        early = int(comp[first[0] - 2])
        for code in (P2P[(False, False)], P2P[(False, True)]):
            j = self.op(s, code, 0)
            if j is not None:
                self.deps.append((early, j, EdgeType.THREAD_NEXT))

    def _chunk_collectives(self, s: int) -> None:
        """A chunk's last params all-gather gates its first forward; with overlap its first grads
        reduce-scatter waits for its last backward."""
        t = self.t
        for code, compute, later in ((AG, F, False), (RS, B, True)):
            if code == RS and not self.overlap:
                continue
            ops = sorted(self.of(s, code), key=lambda j: t.seq_id[j], reverse=not later)
            done = set()
            for j in ops:
                chunk = t.mc[j]
                mine = self.of(s, compute)
                mine = mine[t.mc[mine] == chunk]
                if chunk in done or not len(mine):
                    continue
                done.add(chunk)
                if code == AG:
                    self.deps.append((int(j), int(mine[np.argmin(t.start_ns[mine])]), EdgeType.DATA))
                else:
                    self.deps.append((int(mine[np.argmax(t.end_ns[mine])]), int(j), EdgeType.DATA))

    def _after_compute(self, s: int) -> None:
        t = self.t
        comp = self.of(s, F, B)
        if not len(comp):
            return
        last = int(comp[np.argmax(t.end_ns[comp])])
        gc = self.op(s, GC, 0)
        before = [last] if gc is None else [gc]
        if gc is not None:
            self.deps.append((last, gc, EdgeType.THREAD_NEXT))
        head = [self.op(s, LN, 0), self.op(s, EMB, 0)]
        reduce = sorted(self.of(s, RS), key=lambda j: t.seq_id[j]) if self.data_parallel else []
        if self.data_parallel and self.overlap:
            before = before + reduce[-1:]
            middle = [self.op(s, SEP, 0)]
        else:
            middle = reduce
        tail = [self.op(s, CLIP, 0), self.op(s, OPT, 0)]
        self.chain([j for j in head + middle + tail if j is not None], after=before)

    def _collective_groups(self) -> None:
        t = self.t
        for s in range(self.pp):
            for code, (peer_code, delta) in PEER.items():
                mine, theirs = self.valid.get((s, code), []), self.valid.get(((s + delta) % self.pp, peer_code), [])
                if code in (P2P[(True, True)], P2P[(False, True)]):  # each pair once, from its send
                    if len(mine) != len(theirs):
                        raise TraceFormatError(
                            f"{t.source}: stage {s} has {len(mine)} {OPTYPES[code]} ops but stage "
                            f"{(s + delta) % self.pp} has {len(theirs)} {OPTYPES[peer_code]} ops")
                    self.groups += [([a, b], False) for a, b in zip(mine, theirs)]
        self.groups += [([int(j)], False) for j in np.flatnonzero(self.noop)]
        if self.data_parallel:
            self.groups += [([int(j)], True) for j in np.flatnonzero(np.isin(t.optype, (AG, RS, SEP)))]
        ends = [j for j in (self.op(0, EMB, 0), self.op(self.pp - 1, EMB, 0)) if j is not None]
        if ends:
            self.groups.append((sorted(set(ends)), False))
        clips = [j for j in (self.op(s, CLIP, 0) for s in range(self.pp)) if j is not None]
        if clips:
            self.groups.append((clips, True))


def build_schedule(table: OpTable) -> PipelineSchedule:
    """The dependency model of ``table``'s job, read off the first step of replica 0.

    Raises:
        TraceFormatError: a worker records one op twice, or sends and receives that do not pair up.
    """
    layout = table.layout
    first = table.take((table.dp_rank == 0) & (table.step == table.step.min()))
    overlap = bool((table.optype == SEP).any())
    return _Builder(first, layout.pp, layout.vpp, layout.dp * layout.dsp > 1, overlap).build()
