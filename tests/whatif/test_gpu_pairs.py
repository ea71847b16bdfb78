"""The public GPU pairs under ``tests/data/resnet50_loader_workers`` (ResNet-50 on a V100, DataLoader workers 0
and then 4; four recordings of each, December 2020 to June 2021): the files as Kineto published them, and what
the analysis makes of the GPU-bound run.

Their what-if predictions and intervals are tested with the other real pairs, in ``test_calibration.py``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from bottleneck_oracle.analysis import Analysis, analyze
from bottleneck_oracle.analysis.diff import steady_steps
from bottleneck_oracle.graph import Category
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.truth.edits import edit_from_json, parse_edit
from bottleneck_oracle.whatif.predict import predict_whatif
from tests.conftest import DATA

PAIRS = DATA / "resnet50_loader_workers"
# git blob ids in pytorch/kineto (README.md: the commits and paths)
BLOBS = {
    "june/nw0/worker0.1623143089861.pt.trace.json.gz": "769c3eb7843639ac114d183e07304b6d44931452",
    "june/nw4/worker0.1623212756351.pt.trace.json.gz": "234cf25df597fb99765ee2a49978f5f3c4bbbaf9",
    "jan/nw0/worker0.pt.trace.json.gz": "d3fb4076d72dbbc52465ddc04fa83b849bf48435",
    "jan/nw4/worker0.pt.trace.json.gz": "29dba67d0725d842b951f29a4cbe14e29cfb766b",
    "june2/nw0/worker0.1623143566756.pt.trace.json.gz": "383a066433725823a57b0dfd047d718b65d4741b",
    "june2/nw4/worker0.1623213129365.pt.trace.json.gz": "3e633b5fde9d2e99ea8b07a67771183b7011bbc5",
    "dec/nw0/worker0.pt.trace.json.gz": "2d19c6342350710d5783d27a77c10445e8d8604e",
    "dec/nw4/worker0.pt.trace.json.gz": "7bd25bd008f78fa05a7708de74cb675ecdfd465c",
    "LICENSE": "edb179715b5213644cfe903d43294f54892e707e",
}
BUSY = 0.75  # a step whose GPU is busy this much of it is GPU-bound
GPU_SHARE = 0.40  # ... and GPU work should hold at least this much of its critical path


def _blob(path: Path) -> str:
    data = path.read_bytes()
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@pytest.fixture(scope="module")
def workers4() -> Analysis:
    return analyze(read_trace(PAIRS / "june" / "nw4"))


def _busy_share(a: Analysis, step: int) -> float:
    rows = a.graph.steps.row_of()
    return max(a.gpu.busy_share(rows[(r.step, r.rank)]) for r in a.steps if r.step == step)


def test_the_pairs_are_kineto_s_files_byte_for_byte() -> None:
    assert {rel: _blob(PAIRS / rel) for rel in BLOBS} == BLOBS
    for pair in ("june", "jan", "june2", "dec"):
        (entry,) = json.loads((PAIRS / pair / "whatif.json").read_text())["edits"]
        assert str(edit_from_json(entry["edit"])) == "fix dataloader_stall"
        assert (entry["before"], entry["rerun"]) == ("nw0", "nw4")
        assert all(len(list((PAIRS / pair / run).iterdir())) == 1 for run in ("nw0", "nw4"))
    assert (PAIRS / "README.md").is_file()


def test_the_gpu_bound_steady_steps_of_the_workers_4_run(workers4: Analysis) -> None:
    """Steps 5 (warm-up) and 9 (slow) are not steady; the four steady steps keep the GPU 80 to 83% busy."""
    steady = steady_steps(workers4).steady
    assert [s for s in steady if _busy_share(workers4, s) >= BUSY] == [6, 7, 8, 10]


@pytest.mark.parametrize("step", [6, 7, 10])
def test_a_gpu_bound_step_gives_gpu_work_its_share_of_the_critical_path(workers4: Analysis, step: int) -> None:
    assert _busy_share(workers4, step) >= BUSY
    r = max((r for r in workers4.steps if r.step == step), key=lambda r: r.wall_ns)
    assert r.breakdown_ns[Category.GPU_COMPUTE] >= GPU_SHARE * r.wall_ns, {str(k): v / 1e6 for k, v in
                                                                            r.breakdown_ns.items()}


@pytest.mark.parametrize("step", [6, 7, 8, 10])
def test_host_and_gpu_are_both_near_critical_and_the_what_if_says_so(workers4: Analysis, step: int) -> None:
    """Step 8's range closes 0.108 ms after the GPU's last kernel (in steps 6, 7 and 10 the GPU ends 3 to 8 ms
    after the host): the host launched without ever waiting on the GPU, so its path is the longest and the step's
    attribution goes to the host, by a tenth of a millisecond. The what-if tells the whole story on every steady
    step: a faster host brings the step down to its GPU work and no lower, and kernels twice as fast save at most a
    tenth of it, because the host is then the whole step."""
    rows = workers4.graph.steps.row_of()
    r = max((r for r in workers4.steps if r.step == step), key=lambda r: r.wall_ns)
    gpu_ms = int(workers4.gpu.busy_ns[rows[(r.step, r.rank)]]) / 1e6
    host = predict_whatif(workers4, step, [parse_edit("scale kind=cpu_op x2")])
    kernels = predict_whatif(workers4, step, [parse_edit("scale kind=kernel x2")])
    assert gpu_ms <= host.predicted_ms["replay"] <= 0.9 * host.baseline_ms  # the GPU's work is the floor
    assert 0.9 * kernels.baseline_ms <= kernels.predicted_ms["replay"] <= kernels.baseline_ms
