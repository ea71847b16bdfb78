"""Simulated nodes → one Kineto (PyTorch profiler) JSON trace per rank.

Each CPU node is laid out from its template (ops, annotations, runtime calls with
correlation ids), each GPU node becomes a kernel or memcpy with its ``ac2g`` flow, and
stream waits and syncs get their ``cuda_sync`` events. Times are µs with three decimals
from ``baseTimeNanoseconds``, as Kineto writes them since 2024.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import orjson

from bottleneck_oracle.synth.hardware import GPUS_PER_NODE, Hardware
from bottleneck_oracle.synth.kineto_meta import (
    ORIGIN_NS,
    comm_args,
    comm_kernel_name,
    document,
    kernel_args,
    metadata_events,
    pid_of,
)
from bottleneck_oracle.synth.ops import COMM, Autograd, Call, Template
from bottleneck_oracle.synth.program import Kind
from bottleneck_oracle.synth.schedule import Timeline
from bottleneck_oracle.synth.topology import COMPUTE_STREAM, Topology

__all__ = ["RankData", "rank_data", "render_rank"]

_CBID = {"cudaLaunchKernel": 211, "cudaLaunchKernelExC": 430, "cudaMemcpyAsync": 41, "cudaEventRecord": 135,
         "cudaStreamWaitEvent": 147, "cudaStreamSynchronize": 131, "cudaDeviceSynchronize": 165}
_SYNC_NAME = {Call.WAIT: "Stream Wait Event", Call.SYNC_STREAM: "Stream Sync", Call.SYNC_DEVICE: "Context Sync"}


@dataclass(frozen=True, slots=True)
class RankData:
    """What the writer needs of one rank: its nodes' columns and times, and the job's shared tables."""

    rank: int
    world: int
    hw: Hardware
    node: dict[str, np.ndarray]  # columns of this rank's nodes, in creation order
    annotations: tuple[tuple[int, str, int, int], ...]  # (lane, name, start ns, end ns)
    templates: tuple[Template, ...]
    kernels: tuple[tuple[str, dict[str, object]], ...]  # (name, static args) per kernel index
    comm_infos: dict[int, tuple[str, int, int, int, int]]
    copy_infos: dict[int, tuple[str, int]]
    topology: Topology


def rank_data(tl: Timeline, rank: int) -> RankData:
    """Slices one rank out of a timeline (small enough to send to a worker process)."""
    p, job = tl.program, tl.job
    rows = np.flatnonzero((p.rank == rank) & (p.kind != Kind.ARRIVAL) & (p.kind != Kind.COLL))
    clock = round(rank // GPUS_PER_NODE * job.config.clock_skew_ms * 1e6)  # what this host's clock reads ahead
    node = {"id": rows, "lane": p.lane[rows], "kind": p.kind[rows], "ref": p.ref[rows], "mult": p.mult[rows],
            "launcher": p.launcher[rows], "info": p.info[rows], "link": p.link[rows],
            "start": tl.start_ns[rows] + clock, "end": tl.end_ns[rows] + clock, "base": p.dur_ns[rows]}
    comm_refs = set(p.info[rows][p.info[rows] >= 0].tolist()) | set(p.ref[rows][node["kind"] == Kind.COMM].tolist())
    copy_refs = set(p.ref[rows][node["kind"] == Kind.COPY].tolist())
    notes = tuple((lane, p.names[name], int(tl.start_ns[a]) + clock, int(tl.end_ns[b]) + clock)
                  for r, lane, name, a, b in p.annotations if r == rank)
    return RankData(
        rank=rank, world=job.config.ranks, hw=job.hw, node=node, annotations=notes,
        templates=tuple(job.templates),
        kernels=tuple((k.name, kernel_args(k, job.hw)) for k in job.kernels),
        comm_infos={i: p.comm_infos[i] for i in comm_refs}, copy_infos={i: p.copy_infos[i] for i in copy_refs},
        topology=job.topology,
    )


def _us(ns: int) -> float:
    return (ORIGIN_NS + ns) / 1000


class _Writer:
    """Emits the events of one rank; ids are assigned in time order."""

    def __init__(self, data: RankData) -> None:
        self.d = data
        self.pid = pid_of(data.rank)
        self.device = data.rank % 8
        self.events: list[dict[str, object]] = []
        self.ext = 0
        self.corr = 1000
        self.seq: dict[int, int] = {}
        self.launched: dict[int, list[int]] = {}
        n = data.node
        for i, launcher in enumerate(n["launcher"].tolist()):
            if launcher >= 0:
                self.launched.setdefault(launcher, []).append(i)
        self.cols = {k: v.tolist() for k, v in n.items()}

    def tid(self, lane: int) -> int:
        """OS thread id of a CPU lane (main thread = pid)."""
        return self.pid if lane == 0 else self.pid + 37

    def stream(self, slot: int, info: int) -> int:
        """Stream id of a frame's stream slot: the compute stream, or the stream of the node's group."""
        if slot != COMM:
            return COMPUTE_STREAM
        group = self.d.comm_infos[info][1]
        return self.d.topology.streams[self.d.rank][group]

    def annotation(self, lane: int, name: str, start: int, end: int) -> None:
        """One ``user_annotation`` range."""
        self.ext += 1
        self.events.append({"ph": "X", "cat": "user_annotation", "name": name, "pid": self.pid,
                            "tid": self.tid(lane), "ts": _us(start), "dur": (end - start) / 1000,
                            "args": {"External id": self.ext}})

    def cpu_node(self, row: int) -> None:
        """Every frame of one CPU node, the GPU work it launched and its sync events."""
        c = self.cols
        t = self.d.templates[c["ref"][row]]
        start, end, mult, info = c["start"][row], c["end"][row], c["mult"][row], c["info"][row]
        ext_wait = max(end - start - round(t.dur_ns * mult), 0)
        tid = self.tid(c["lane"][row])
        gpu = iter(self.launched.get(c["id"][row], ()))
        op_ids: list[int] = []
        last_op = 0
        records: dict[int, int] = {}
        for span in t.spans:
            f = span.frame
            ts = start + round(span.start_ns * mult) + (ext_wait if span.after_block else 0)
            dur = round(span.dur_ns * mult) + (ext_wait if span.holds_block else 0)
            del op_ids[span.depth:]
            if f.cat != "cuda_runtime":
                self.ext += 1
                # runtime calls carry the id of the innermost cpu_op: annotations (nccl:*) are skipped
                op_ids += [self.ext if f.cat == "cpu_op" else 0] * (span.depth + 1 - len(op_ids))
                last_op = self.ext if f.cat == "cpu_op" else last_op
                args: dict[str, object] = {"External id": self.ext, **dict(f.args)}
                if f.name == "record_param_comms":
                    args.update(comm_args(self.d.comm_infos[info], self.d.topology))
                self._autograd(f.autograd, row, args, tid, ts)
                self.events.append({"ph": "X", "cat": f.cat, "name": f.name, "pid": self.pid, "tid": tid,
                                    "ts": _us(ts), "dur": dur / 1000, "args": args})
                continue
            self.corr += 1
            # outside every op (work.wait() after a c10d op): the id of the node's last op
            owner = next((x for x in reversed(op_ids) if x), last_op or self.corr)
            self.events.append({"ph": "X", "cat": "cuda_runtime", "name": f.name, "pid": self.pid, "tid": tid,
                                "ts": _us(ts), "dur": dur / 1000,
                                "args": {"External id": owner, "cbid": _CBID[f.name], "correlation": self.corr}})
            self._call(f.call, f.stream, f.wait_on, info, ts, dur, tid, owner, records, gpu)

    def _autograd(self, mark: Autograd, row: int, args: dict[str, object], tid: int, ts: int) -> None:
        if mark == Autograd.NONE:
            return
        node = self.cols["id"][row] if mark == Autograd.FORWARD else self.cols["link"][row]
        if node < 0:
            return
        seq = self.seq.setdefault(node, len(self.seq) + 1)
        args["Sequence number"] = seq
        args["Fwd thread id"] = 0 if mark == Autograd.FORWARD else 1
        flow = {"ph": "s" if mark == Autograd.FORWARD else "f", "id": seq, "pid": self.pid, "tid": tid,
                "ts": _us(ts), "cat": "fwdbwd", "name": "fwdbwd"}
        if mark == Autograd.BACKWARD:
            flow["bp"] = "e"
        self.events.append(flow)

    def _call(self, call: Call, slot: int, wait_on: int, info: int, ts: int, dur: int, tid: int, owner: int,
              records: dict[int, int], gpu: Iterator[int]) -> None:
        if call in (Call.LAUNCH, Call.MEMCPY):
            self.gpu_node(next(gpu), owner, ts, tid)
        elif call == Call.RECORD:
            records[slot] = self.corr
        elif call in _SYNC_NAME:
            stream = -1 if call == Call.SYNC_DEVICE else self.stream(slot, info)
            args: dict[str, object] = {"cuda_sync_kind": _SYNC_NAME[call], "stream": stream,
                                       "correlation": self.corr, "device": self.device, "context": 1}
            if call == Call.WAIT:
                args.update({"wait_on_stream": self.stream(wait_on, info),
                             "wait_on_cuda_event_record_corr_id": records.get(wait_on, -1),
                             "wait_on_cuda_event_id": records.get(wait_on, 0) % 64 + 1})
            self.events.append({"ph": "X", "cat": "cuda_sync", "name": _SYNC_NAME[call], "pid": self.device,
                                "tid": stream, "ts": _us(ts), "dur": dur / 1000, "args": args})

    def gpu_node(self, row: int, owner: int, call_ts: int, tid: int) -> None:
        """A kernel or memcpy launched by the current runtime call, and its ``ac2g`` flow."""
        c, d = self.cols, self.d
        kind, ref, stream = c["kind"][row], c["ref"][row], c["lane"][row]
        start, end = c["start"][row], c["end"][row]
        base = {"External id": owner, "device": self.device, "context": 1, "stream": stream,
                "correlation": self.corr}
        if kind == Kind.KERNEL:
            name, static = d.kernels[ref]
            event = {"ph": "X", "cat": "kernel", "name": name, "args": {**base, "queued": 0, **static}}
        elif kind == Kind.COMM:
            info = d.comm_infos[ref]
            event = {"ph": "X", "cat": "kernel", "name": comm_kernel_name(info[0]),
                     "args": {**base, "queued": 0, **comm_args(info, d.topology)}}
        else:
            name, nbytes = d.copy_infos[ref]
            gbps = nbytes / max(end - start, 1)
            event = {"ph": "X", "cat": "gpu_memcpy", "name": name,
                     "args": {**base, "bytes": nbytes, "memory bandwidth (GB/s)": gbps}}
        event.update({"pid": self.device, "tid": stream, "ts": _us(start), "dur": (end - start) / 1000})
        self.events += [event,
                        {"ph": "s", "id": self.corr, "pid": self.pid, "tid": tid, "ts": _us(call_ts),
                         "cat": "ac2g", "name": "ac2g"},
                        {"ph": "f", "id": self.corr, "pid": self.device, "tid": stream, "ts": _us(start),
                         "cat": "ac2g", "name": "ac2g", "bp": "e"}]


def _cpu_items(data: RankData) -> list[tuple[int, int, int, int]]:
    """CPU nodes and annotations in time order: (start, -end, order, index); annotations get index < 0."""
    n = data.node
    cpu = np.flatnonzero(n["kind"] == Kind.CPU)
    items = [(s, -e, 1, int(i)) for s, e, i in zip(n["start"][cpu].tolist(), n["end"][cpu].tolist(), cpu)]
    items += [(s, -e, 0, -1 - i) for i, (_, _, s, e) in enumerate(data.annotations)]
    items.sort()
    return items


def render_rank(data: RankData) -> tuple[bytes, int]:
    """The gzipped Kineto JSON document of one rank (byte-identical for equal input) and its event count."""
    w = _Writer(data)
    for _, _, _, index in _cpu_items(data):
        if index < 0:
            lane, name, start, end = data.annotations[-1 - index]
            w.annotation(lane, name, start, end)
        else:
            w.cpu_node(index)
    starts = data.node["start"]
    window = (int(starts.min()) - 20_000, int(data.node["end"].max()) + 20_000)
    streams = sorted(set(data.node["lane"][data.node["lane"] >= COMPUTE_STREAM].tolist()))
    events = metadata_events(data.rank, streams, window) + w.events
    doc = document(data.rank, data.world, data.hw, data.topology, events)
    return gzip.compress(orjson.dumps(doc), compresslevel=1, mtime=0), len(events)
