"""The 1F1B schedule re-run with another number of micro-batches: a small dependency simulation
over the units measured by ``_stage_template`` (for ``structural.microbatches``).

Each stage runs its warm-up forwards, then one forward and one backward in turn, then the
remaining backwards. F(s, m) waits for F(s-1, m), B(s, m) for B(s+1, m): the receive is issued
once the stage is free, the transfer follows once both sides are ready. The GPU also waits for
the CPU's launches, which run ahead without waiting inside the pipeline (a gloo pipeline's
thread is its own device and waits with it).
"""

from __future__ import annotations

from bottleneck_oracle.replay._stage_template import StageStep, Template

__all__ = ["pipeline_depths", "run_step"]


def _order(pp: int, stage: int, k: int) -> list[tuple[bool, int]]:
    """1F1B on one stage: (is_forward, micro-batch) of its warm-up forwards, steady pairs, cool-down backwards."""
    warm = min(pp - stage - 1, k)
    order = [(True, m) for m in range(warm)]
    for i in range(k - warm):
        order += [(True, warm + i), (False, i)]
    return order + [(False, m) for m in range(k - warm, k)]


def pipeline_depths(links: dict[int, tuple[int, int]]) -> tuple[dict[int, int], dict[int, int]]:
    """Each rank's stage and the number of stages of its pipeline, walking the links.

    Args:
        links (dict[int, tuple[int, int]]): rank → (previous-stage rank, next-stage rank), -1 at the ends.
    """
    stage: dict[int, int] = {}
    for r in links:
        s, p = 0, links[r][0]
        while p >= 0 and s <= len(links):
            s, p = s + 1, links.get(p, (-1, -1))[0]
        stage[r] = s
    depth: dict[int, int] = {}
    for r in links:  # the last stage of r's pipeline: walk forward
        s, n = stage[r], links[r][1]
        while n >= 0 and s <= len(links):
            s, n = s + 1, links.get(n, (-1, -1))[1]
        depth[r] = s + 1
    return stage, depth


def run_step(steps: dict[int, StageStep], links: dict[int, tuple[int, int]], start: dict[int, float], k: int,
             keep_global_batch: bool) -> dict[int, float]:
    """Completion time (ns) of every rank's step under a 1F1B schedule of ``k`` micro-batches.

    Args:
        steps (dict[int, StageStep]): rank → its traced step (one step number).
        links (dict[int, tuple[int, int]]): rank → (previous-stage rank, next-stage rank).
        start (dict[int, float]): rank → where its step's window opens (ns).
        k (int): micro-batches.
        keep_global_batch (bool): each micro-batch's work scales by traced/``k``.
    """
    stage, depth = pipeline_depths({r: links[r] for r in steps})
    order = {r: _order(depth[r], stage[r], k) for r in steps}
    done: dict[tuple[int, bool, int], float] = {}
    pos = dict.fromkeys(steps, 0)
    cpu = {r: start[r] + s.pre_cpu for r, s in steps.items()}
    gpu = {r: start[r] + s.pre_gpu for r, s in steps.items()}
    cpu_end = dict(cpu)
    moved = True
    while moved:
        moved = False
        for r, s in steps.items():
            scale = s.microbatches / k if keep_global_batch else 1.0
            while pos[r] < len(order[r]):
                fwd, m = order[r][pos[r]]
                peer = links[r][0] if fwd else links[r][1]
                if peer in steps and (peer, fwd, m) not in done:
                    break  # waits for its neighbour's activation (forward) or gradient (backward)
                t: Template = s.forward if fwd else s.backward
                ready = gpu[r]
                if peer in steps:  # both sides issued and free, then the transfer
                    extra = t.p2p_excess[m] if m < len(t.p2p_excess) else 0.0
                    issued = max(ready, cpu_end[r] + t.recv, done[(peer, fwd, m)])
                    # a GPU activation is bandwidth-bound; a gloo message's lag is latency and scheduling
                    ready = issued + max(t.p2p, 0.0) * (1.0 if s.on_cpu else scale) + extra
                begin = max(ready, cpu[r] + t.lead)
                gpu[r] = max(begin + t.busy * scale + t.idle, cpu[r] + t.tail + t.last * scale)
                cpu_end[r] = gpu[r] if s.on_cpu else cpu[r] + t.cpu  # a CPU pipeline's thread is its device
                done[(r, fwd, m)] = max(gpu[r], cpu_end[r] + t.send)  # its output is ready to go
                pos[r] += 1
                if pos[r] < len(order[r]):
                    cpu[r] = cpu_end[r] + s.between[(fwd, order[r][pos[r]][0])]
                moved = True
    assert all(pos[r] == len(order[r]) for r in steps), "1F1B re-schedule deadlocked"
    return {r: max(gpu[r] + s.post_gpu, cpu_end[r] + s.post_cpu) for r, s in steps.items()}
