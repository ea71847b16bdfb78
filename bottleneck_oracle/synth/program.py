"""The job as a graph of timed nodes: CPU ops, gaps, kernels, copies and collectives, with their dependencies.

Every node has a start and an end; a dependency says "my start (or end) is no earlier
than that node's start (or end) plus a lag". A collective is an arrival node per member
and one node for the transfer, which starts when the last member arrived; each member's
kernel ends with it, so early ranks wait inside their kernel as they do on real GPUs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import IntEnum

import numpy as np

__all__ = ["Dep", "Draws", "Graph", "Kind", "Lane", "Program"]


class Kind(IntEnum):
    """What a node is."""

    CPU = 0  # a CPU op laid out from a template
    GAP = 1  # CPU time covered by no event (Python, sleeps, waits)
    KERNEL = 2  # a compute kernel
    COMM = 3  # an NCCL kernel
    COPY = 4  # a memcpy
    ARRIVAL = 5  # virtual: a member reached a collective on its stream
    COLL = 6  # virtual: one collective's transfer


class Lane(IntEnum):
    """CPU lanes; GPU lanes are the stream ids themselves (>= 7)."""

    MAIN = 0
    AUTOGRAD = 1
    VIRTUAL = 2


class Dep(IntEnum):
    """How a dependency binds: (my point) >= (its point) + lag."""

    START_AFTER_END = 0
    START_AFTER_START = 1
    END_AFTER_END = 2


class Draws:
    """Log-normal noise factors with mean 1 from one seeded stream, drawn in blocks."""

    def __init__(self, key: tuple[int, ...], sigma: float) -> None:
        self._rng = np.random.default_rng(list(key))
        self._sigma = sigma
        self._buf: list[float] = []

    def next(self) -> float:
        """The next factor."""
        if self._sigma == 0:
            return 1.0
        if not self._buf:
            z = self._rng.standard_normal(1024)
            self._buf = np.exp(self._sigma * z - self._sigma ** 2 / 2).tolist()[::-1]
        return self._buf.pop()


def hash_noise(sigma: float, *key: int) -> float:
    """A deterministic log-normal factor from integers (splitmix64, Box-Muller)."""
    if sigma == 0:
        return 1.0
    x = 0x9E3779B97F4A7C15
    for k in key:
        x = (x ^ (k & 0xFFFFFFFFFFFFFFFF)) * 0xBF58476D1CE4E5B9 & 0xFFFFFFFFFFFFFFFF
        x ^= x >> 31
    u1 = ((x >> 11) + 1) / 2.0 ** 53
    u2 = ((x * 0x94D049BB133111EB & 0xFFFFFFFFFFFFFFFF) >> 11) / 2.0 ** 53
    z = math.sqrt(-2 * math.log(u1)) * math.cos(2 * math.pi * u2)
    return math.exp(sigma * z - sigma * sigma / 2)


@dataclass(frozen=True, slots=True)
class Program:
    """The frozen graph: node columns, dependencies and the side tables the writer needs.

    Shapes:
        node columns: [N]; dependency columns: [D].
    """

    rank: np.ndarray  # int32
    lane: np.ndarray  # int32: Lane, or a stream id
    kind: np.ndarray  # int8: Kind
    ref: np.ndarray  # int32: template (CPU), kernel (KERNEL), comm info (COMM), copy info (COPY)
    dur_ns: np.ndarray  # int64: base duration (kernels: before interference)
    mult: np.ndarray  # float64: CPU scale of the template
    step: np.ndarray  # int32: step index (0-based) the node belongs to
    kernel_class: np.ndarray  # int8: KernelClass index for compute kernels, -1 otherwise
    launcher: np.ndarray  # int32: CPU node that launched a GPU node, -1
    info: np.ndarray  # int32: comm info of a CPU comm node, -1
    link: np.ndarray  # int32: forward node of a backward CPU node, -1
    coll_of: np.ndarray  # int32: COLL node of a COMM kernel, -1
    dep_dst: np.ndarray  # int32
    dep_src: np.ndarray  # int32
    dep_type: np.ndarray  # int8: Dep
    dep_lag: np.ndarray  # int64 ns
    names: tuple[str, ...]
    annotations: tuple[tuple[int, int, int, int, int], ...]  # (rank, lane, name, open node, close node)
    step_marks: tuple[tuple[int, int, int, int], ...]  # (rank, step index, open node, close node)
    comm_infos: tuple[tuple[str, int, int, int, int], ...]  # (kind, group, seq, in nelems, out nelems)
    copy_infos: tuple[tuple[str, int], ...]  # (name, bytes)

    def __len__(self) -> int:
        return len(self.rank)


class Graph:
    """Append-only builder of a ``Program``."""

    _COLUMNS = ("rank", "lane", "kind", "ref", "dur_ns", "mult", "step", "kernel_class", "launcher", "info", "link")

    def __init__(self) -> None:
        self.cols: list[list[int | float]] = [[] for _ in self._COLUMNS]
        self.deps: tuple[list[int], list[int], list[int], list[int]] = ([], [], [], [])
        self.names: dict[str, int] = {}
        self.annotations: list[tuple[int, int, int, int, int]] = []
        self.step_marks: list[tuple[int, int, int, int]] = []
        self.comm_infos: list[tuple[str, int, int, int, int]] = []
        self.copy_infos: list[tuple[str, int]] = []
        self.colls: dict[tuple[int, int], list[tuple[int, int]]] = {}
        self.coll_cost: dict[tuple[int, int], int] = {}
        self.coll_of: dict[int, int] = {}

    def __len__(self) -> int:
        return len(self.cols[0])

    def add(self, rank: int, lane: int, kind: Kind, ref: int, dur_ns: int, step: int, *, mult: float = 1.0,
            kernel_class: int = -1, launcher: int = -1, info: int = -1, link: int = -1) -> int:
        """Appends a node and returns its id."""
        c = self.cols
        c[0].append(rank)
        c[1].append(lane)
        c[2].append(kind)
        c[3].append(ref)
        c[4].append(dur_ns)
        c[5].append(mult)
        c[6].append(step)
        c[7].append(kernel_class)
        c[8].append(launcher)
        c[9].append(info)
        c[10].append(link)
        return len(c[0]) - 1

    def dep(self, dst: int, src: int, how: Dep, lag_ns: int = 0) -> None:
        """``dst``'s start (or end) waits for ``src``'s end (or start) plus ``lag_ns``."""
        d = self.deps
        d[0].append(dst)
        d[1].append(src)
        d[2].append(int(how))
        d[3].append(lag_ns)

    def name(self, text: str) -> int:
        """Interned id of an annotation name."""
        return self.names.setdefault(text, len(self.names))

    def join(self, key: tuple[int, int], arrival: int, kernel: int, cost_ns: int) -> None:
        """Registers one member of the collective ``key`` (group, seq); the longest member cost wins."""
        self.colls.setdefault(key, []).append((arrival, kernel))
        self.coll_cost[key] = max(self.coll_cost.get(key, 0), cost_ns)

    def close_collectives(self, group_sizes: list[int]) -> None:
        """Adds one COLL node per collective: it starts when the last member arrives, members end with it."""
        for key, members in self.colls.items():
            assert len(members) == group_sizes[key[0]], f"collective {key}: {len(members)} members arrived"
            first_rank = int(self.cols[0][members[0][0]])
            coll = self.add(first_rank, Lane.VIRTUAL, Kind.COLL, key[0], self.coll_cost[key], -1)
            for arrival, kernel in members:
                self.dep(coll, arrival, Dep.START_AFTER_END)
                self.dep(kernel, coll, Dep.END_AFTER_END)
                self.coll_of[kernel] = coll
        self.colls.clear()

    def freeze(self) -> Program:
        """The graph as arrays."""
        c = dict(zip(self._COLUMNS, self.cols))
        n = len(self)
        coll_of = np.full(n, -1, dtype=np.int32)
        if self.coll_of:
            coll_of[np.fromiter(self.coll_of, np.int64)] = np.fromiter(self.coll_of.values(), np.int64)
        i32 = {k: np.array(c[k], dtype=np.int32) for k in ("rank", "lane", "ref", "step", "launcher", "info", "link")}
        return Program(
            **i32, kind=np.array(c["kind"], dtype=np.int8), dur_ns=np.array(c["dur_ns"], dtype=np.int64),
            mult=np.array(c["mult"], dtype=np.float64), kernel_class=np.array(c["kernel_class"], dtype=np.int8),
            coll_of=coll_of, dep_dst=np.array(self.deps[0], dtype=np.int32),
            dep_src=np.array(self.deps[1], dtype=np.int32), dep_type=np.array(self.deps[2], dtype=np.int8),
            dep_lag=np.array(self.deps[3], dtype=np.int64), names=tuple(self.names),
            annotations=tuple(self.annotations), step_marks=tuple(self.step_marks),
            comm_infos=tuple(self.comm_infos), copy_infos=tuple(self.copy_infos),
        )
