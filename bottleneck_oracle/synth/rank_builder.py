"""The primitives one rank's program is written with: CPU ops that launch GPU work, collectives, syncs,
gaps, hand-offs between threads and annotations.

Program order holds on every CPU thread and GPU stream. A kernel starts no earlier than its
launch call's end plus the launch latency; a comm stream waits for the compute stream before
each collective (as ProcessGroupNCCL does) and a blocking collective makes the compute stream
wait for it.
"""

from __future__ import annotations

from bottleneck_oracle.synth.hardware import collective_time_s
from bottleneck_oracle.synth.job import KERNEL_CLASSES, Job
from bottleneck_oracle.synth.model import Kernel
from bottleneck_oracle.synth.ops import collective_template, stream_wait_template
from bottleneck_oracle.synth.program import Dep, Draws, Graph, Kind, Lane, hash_noise
from bottleneck_oracle.synth.topology import COMPUTE_STREAM

__all__ = ["RankBuilder", "GPU_GAP_NS"]

CPU_GAP_NS = 1_200  # Python between two ops
GPU_GAP_NS = 1_000  # between two kernels on a stream
MARK_NS = 1_500  # entering or leaving an annotated range
HANDOFF_NS = 25_000  # a thread woken by another
WAKE_NS = 4_000  # a blocked call returning after the GPU work it waited for
_P2P = ("send", "recv")
_COLL_KIND = {"allreduce": "allreduce", "reducescatter": "reducescatter", "allgather": "allgather",
              "send": "sendrecv", "recv": "sendrecv"}


class RankBuilder:
    """Writes one rank's nodes into the shared graph.

    Attributes:
        cpu_factor: scale of CPU op times (injected launch overhead).
        gpu_factor: scale of compute kernel times (injected slow compute).
        injecting: draw noise from the injection stream, so faults leave the draws of regular ops alone.
    """

    def __init__(self, graph: Graph, job: Job, rank: int) -> None:
        self.g = graph
        self.job = job
        self.rank = rank
        self.step = 0
        self.cpu_factor = 1.0
        self.gpu_factor = 1.0
        self.injecting = False
        self.last: dict[int, int] = {}
        self.lane_deps: dict[int, list[tuple[int, Dep, int]]] = {}
        self.seqs: dict[int, int] = {}
        self._open: list[tuple[int, int, int]] = []
        self._draws = (Draws((0,), 0.0), Draws((0,), 0.0))

    def begin_step(self, step: int) -> None:
        """Starts drawing noise for step index ``step`` (one seeded stream per rank, step and purpose)."""
        c = self.job.config
        self.step = step
        self._draws = (Draws((c.seed, self.rank, step, 0), c.noise), Draws((c.seed, self.rank, step, 1), c.noise))

    def noise(self) -> float:
        """The next noise factor."""
        return self._draws[1 if self.injecting else 0].next()

    def node(self, lane: int, kind: Kind, ref: int, dur_ns: int, *, mult: float = 1.0, kernel_class: int = -1,
             launcher: int = -1, info: int = -1, link: int = -1) -> int:
        """A node in program order on ``lane``, after any hand-off or wait queued for that lane."""
        nid = self.g.add(self.rank, lane, kind, ref, dur_ns, self.step, mult=mult, kernel_class=kernel_class,
                         launcher=launcher, info=info, link=link)
        prev = self.last.get(lane)
        if prev is not None:
            self.g.dep(nid, prev, Dep.START_AFTER_END, GPU_GAP_NS if lane >= COMPUTE_STREAM else CPU_GAP_NS)
        for src, how, lag in self.lane_deps.pop(lane, ()):
            self.g.dep(nid, src, how, lag)
        self.last[lane] = nid
        return nid

    def cpu(self, lane: int, template: int, launches: tuple[tuple[Kind, int, int], ...] = (),
            link: int = -1, info: int = -1) -> int:
        """A CPU op and the GPU work it launches: ``(KERNEL, kernel index, stream)`` or ``(COPY, copy info, stream)``.

        A template with a blocking call makes the op end after the work it waits for: the compute
        stream's last work (stream sync) or every stream's (device sync).
        """
        t = self.job.templates[template]
        mult = self.cpu_factor * self.noise()
        nid = self.node(lane, Kind.CPU, template, round(t.dur_ns * mult), mult=mult, link=link, info=info)
        for k, (kind, ref, stream) in enumerate(launches):
            if kind == Kind.KERNEL:
                kernel = self.job.kernels[ref]
                dur = self.job.kernel_ns[ref] * self.noise() * self.gpu_factor
                gid = self.node(stream, kind, ref, round(dur), launcher=nid,
                                kernel_class=KERNEL_CLASSES.index(kernel.kernel_class))
            else:
                gid = self.node(stream, kind, ref, self._copy_ns(ref), launcher=nid)
            self.g.dep(gid, nid, Dep.START_AFTER_START, round(t.launch_end_ns[k] * mult) + self.job.latency_ns)
        if t.block_tail_ns >= 0:
            lanes = [COMPUTE_STREAM] if t.blocks_stream else [ln for ln in self.last if ln >= COMPUTE_STREAM]
            for ln in lanes:
                self.g.dep(nid, self.last[ln], Dep.END_AFTER_END, round(t.block_tail_ns * mult) + WAKE_NS)
        return nid

    def _copy_ns(self, info: int) -> int:
        nbytes = self.g.copy_infos[info][1]
        return round(max(nbytes / self.job.hw.pcie_bytes_per_s, 1.5e-6) * 1e9)

    def compute(self, lane: int, template: int, kernels: tuple[Kernel, ...], link: int = -1) -> int:
        """A compute op launching ``kernels`` on the compute stream."""
        refs = tuple((Kind.KERNEL, self.job.kernel(k), COMPUTE_STREAM) for k in kernels)
        return self.cpu(lane, template, refs, link=link)

    def copy(self, lane: int, template: int, name: str, nbytes: int) -> int:
        """A CPU op launching one memcpy on the compute stream."""
        self.g.copy_infos.append((name, nbytes))
        return self.cpu(lane, template, ((Kind.COPY, len(self.g.copy_infos) - 1, COMPUTE_STREAM),))

    def collective(self, lane: int, kind: str, group: int, nelems: int, *, blocking: bool,
                   out_nelems: int | None = None, extra_ns: int = 0) -> int:
        """A c10d collective or p2p op on ``group``; returns its comm kernel.

        Args:
            kind: ``allreduce``, ``reducescatter``, ``allgather``, ``send`` or ``recv``.
            nelems: bf16 elements of the message (the whole buffer for reduce-scatter and all-gather).
            blocking: the compute stream waits for the kernel (``work.wait()``).
            extra_ns: added to the transfer (an injected slow link).
        """
        job, g = self.job, self.g
        stream = job.topology.streams[self.rank][group]
        seq = self.seqs.get(group, 0)
        self.seqs[group] = seq + 1
        g.comm_infos.append((kind, group, seq, nelems, nelems if out_nelems is None else out_nelems))
        info = len(g.comm_infos) - 1
        tref = job.template(("collective", kind, blocking),
                            lambda: collective_template(kind, job.hw, (), blocking))
        t = job.templates[tref]
        mult = self.cpu_factor * self.noise()
        cpu = self.node(lane, Kind.CPU, tref, round(t.dur_ns * mult), mult=mult, info=info)
        arrival = g.add(self.rank, Lane.VIRTUAL, Kind.ARRIVAL, info, 0, self.step)
        g.dep(arrival, cpu, Dep.START_AFTER_START, round(t.launch_end_ns[0] * mult) + job.latency_ns)
        if COMPUTE_STREAM in self.last:  # the comm stream waits for the compute stream's recorded event
            g.dep(arrival, self.last[COMPUTE_STREAM], Dep.START_AFTER_END, GPU_GAP_NS)
        if stream in self.last:  # NCCL runs one stream's kernels in order: a queued transfer waits its turn
            g.dep(arrival, self.last[stream], Dep.START_AFTER_END, GPU_GAP_NS)
        kernel = self.node(stream, Kind.COMM, info, 0, launcher=cpu)
        g.dep(kernel, arrival, Dep.START_AFTER_END, 0)
        g.join((group, seq), arrival, kernel, self._transfer_ns(kind, group, seq, nelems) + extra_ns)
        if blocking:
            self.lane_deps.setdefault(COMPUTE_STREAM, []).append((kernel, Dep.START_AFTER_END, GPU_GAP_NS))
        return kernel

    def _transfer_ns(self, kind: str, group: int, seq: int, nelems: int) -> int:
        job = self.job
        ranks = job.topology.groups[group].ranks
        base = collective_time_s(_COLL_KIND[kind], 2.0 * nelems, ranks, job.hw)
        factor = hash_noise(job.config.noise, job.config.seed, group, seq, int(kind in _P2P))
        return round(base * factor * 1e9 / job.tuning.collective(_COLL_KIND[kind]))

    def wait_for(self, lane: int, group: int) -> int:
        """``work.wait()`` alone: the compute stream waits for the last kernel on ``group``'s stream."""
        job, g = self.job, self.g
        g.comm_infos.append(("wait", group, -1, 0, 0))
        tref = job.template(("wait",), lambda: stream_wait_template(job.hw))
        mult = self.cpu_factor * self.noise()
        node = self.node(lane, Kind.CPU, tref, round(job.templates[tref].dur_ns * mult), mult=mult,
                         info=len(g.comm_infos) - 1)
        awaited = self.last.get(job.topology.streams[self.rank][group])
        if awaited is not None:
            self.lane_deps.setdefault(COMPUTE_STREAM, []).append((awaited, Dep.START_AFTER_END, GPU_GAP_NS))
        return node

    def gap(self, lane: int, dur_ns: int) -> int:
        """CPU time that no event covers."""
        return self.node(lane, Kind.GAP, -1, max(int(dur_ns), 0))

    def hand_off(self, src: int, lane: int) -> None:
        """The next node on ``lane`` starts only after ``src`` ended (a thread wakes another)."""
        self.lane_deps.setdefault(lane, []).append((src, Dep.START_AFTER_END, HANDOFF_NS))

    def wait_until(self, lane: int, src: int) -> int:
        """An idle gap on ``lane`` that lasts until ``src`` ended (a thread waiting for another)."""
        node = self.gap(lane, 0)
        self.g.dep(node, src, Dep.END_AFTER_END, HANDOFF_NS)
        return node

    def open(self, lane: int, name: str) -> int:
        """Enters an annotated range (``record_function``) on ``lane``."""
        node = self.gap(lane, MARK_NS)
        self._open.append((lane, self.g.name(name), node))
        return node

    def close(self, lane: int) -> int:
        """Leaves the innermost open range on ``lane``; returns its closing node."""
        index = max(i for i, (ln, _, _) in enumerate(self._open) if ln == lane)
        _, name, first = self._open.pop(index)
        node = self.gap(lane, MARK_NS)
        self.g.annotations.append((self.rank, lane, name, first, node))
        return node
