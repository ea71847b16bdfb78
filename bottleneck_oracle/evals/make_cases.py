"""The default case set (``oracle eval make-cases``): synthetic GPU jobs with one injected fault of
each category the analysis can name, clean jobs of several seeds, and the shipped real capture;
with ``large=True`` also more seeds and real 2-rank CPU captures of each fault a capture can inject.

The truth of a case is the injection's, never the analysis's: its category, step and ranks come from
the recipe, its culprit ops from what the injection puts into the trace (the ops it creates, or for
an uncovered pause the ops on either side of the gap, read from the raw events), and its step times
under edits from the job simulated again with the edit (measured by the same analysis).
"""

from __future__ import annotations

import gzip
import json
import logging
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bottleneck_oracle.evals._recipes import run_recipe
from bottleneck_oracle.evals.cases import DEFAULT_QUESTION, dump_case
from bottleneck_oracle.evals.types import Case, EditTruth, Expect
from bottleneck_oracle.truth import TRACE_PATTERN, parse_edit
from bottleneck_oracle.whatif.verify import rerun_step_ms

__all__ = ["EXAMPLES", "LEFT_OUT", "STEP", "make_cases"]

log = logging.getLogger(__name__)

STEP = 3  # the injected (or, clean, the asked-about) step of every synthetic job: the middle of 5
_STEPS = 5
_DP2 = {"model": "gpt2-small", "dp": 2, "steps": _STEPS}
_PP2 = {"model": "tiny", "pp": 2, "microbatches": 4, "steps": _STEPS}
_CAPTURE = {"ranks": 2, "steps": 6, "d_model": 256, "layers": 3, "seq_len": 128}  # tests/analysis/test_captured.py
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
# Categories with no case, and why. An injected straggler is a CPU delay at the step start: an
# uncovered gap, which the analysis names host_pause first and lists the late rank right after it
# (findings/findings.py), so no job makes straggler_rank the cause the analysis reports. A checkpoint is
# saved by every rank: saved by one, it makes that rank late in the next step's all-reduce, and that
# straggler finding outweighs the checkpoint's own.
LEFT_OUT = {"straggler_rank": "the injected CPU delay is reported as the host_pause that makes the rank late; "
                              "straggler_rank comes second"}
_PARAPHRASES = ("What is holding back step {step}?", "What caused the slowdown in step {step}?",
                "Diagnose step {step}.")


@dataclass(frozen=True, slots=True)
class _Job:
    """A case to make: its id, recipe, questions and the extra edits whose truth is recorded."""

    id: str
    kind: str
    fields: dict[str, Any]
    injection: str = ""
    edits: tuple[str, ...] = ()
    paraphrase: int | None = None


def _default_jobs() -> list[_Job]:
    faults = [("dataloader_stall@3:1=40ms", _DP2, ()), ("host_pause@3:1=40ms", _DP2, ()),
              ("exposed_communication@3=8192MB", {**_DP2, "hardware": "A100"}, ("scale op=allreduce x2",)),
              ("slow_compute@3:1=3x", _DP2, ("scale op=gemm x2",)), ("host_sync@3:1=20ms", _DP2, ()),
              ("launch_overhead@3:1=8x", _DP2, ()), ("checkpoint_stall@3=64MB", _DP2, ()),
              ("pipeline_bubble@3=20ms", _PP2, ())]
    jobs = [_Job(f"synth_{inj.split('@')[0]}", "synth", job, inj, (f"fix {inj.split('@')[0]}", *extra), i % 3)
            for i, (inj, job, extra) in enumerate(faults)]
    # every rank stalls at once: fixed on the rank the critical path names alone, the next rank's stall binds
    jobs.append(_Job("synth_dataloader_stall_every_rank", "synth", {**_DP2, "dp": 4}, "dataloader_stall@3=40ms",
                     ("fix dataloader_stall",), None))
    clean = [{**_DP2, "seed": 0}, {**_PP2, "model": "gpt2-small", "seed": 1}, {**_DP2, "hardware": "A100", "seed": 2}]
    edits = [("scale op=allreduce x2", "scale op=gemm x2"), ("scale op=gemm x2",), ()]
    return jobs + [_Job(f"clean_s{i}", "synth", job, "", edits[i], i) for i, job in enumerate(clean)]


def _large_jobs() -> list[_Job]:
    jobs = [_Job(f"{j.id}_s7", j.kind, {**j.fields, "seed": 7}, j.injection.replace(":1=", ":0="), (),
                 None) for j in _default_jobs() if j.injection]
    jobs += [_Job(f"clean_s{seed}", "synth", {**_DP2, "tp": seed % 2 + 1, "seed": seed}) for seed in (3, 4, 5)]
    captures = ["host_pause@5:0=400ms", "dataloader_stall@5:1=400ms", "slow_compute@5:1=4x",
                "exposed_communication@5=64MB", "checkpoint_stall@5:1=64MB"]
    jobs += [_Job(f"capture_{inj.split('@')[0]}", "capture", _CAPTURE, inj) for inj in captures]
    return jobs + [_Job("capture_clean", "capture", _CAPTURE)]


def _events(folder: Path, rank: int) -> list[dict[str, Any]]:
    doc = json.loads(gzip.decompress((folder / TRACE_PATTERN.format(rank=rank)).read_bytes()))
    return [e for e in doc["traceEvents"] if e.get("ph") == "X" and "dur" in e]


def _gap_ops(folder: Path, rank: int, step: int) -> tuple[str, ...]:
    """The ops on either side of the longest stretch of ``step``'s main thread that no op covers
    (an injected pause: it has no op of its own), outermost first."""
    events = _events(folder, rank)
    marker = next(e for e in events if e["name"] == f"ProfilerStep#{step}")
    ops = sorted((e for e in events if e.get("cat") == "cpu_op" and e["tid"] == marker["tid"]
                  and marker["ts"] <= e["ts"] < marker["ts"] + marker["dur"]), key=lambda e: (e["ts"], -e["dur"]))
    longest, start, stop = 0.0, marker["ts"], marker["ts"]
    end = marker["ts"]
    for e in ops:
        if e["ts"] - end > longest:
            longest, start, stop = e["ts"] - end, end, e["ts"]
        end = max(end, e["ts"] + e["dur"])
    before = [e["name"] for e in ops if start > marker["ts"] and abs(e["ts"] + e["dur"] - start) < 1.0]
    after = [e["name"] for e in ops if abs(e["ts"] - stop) < 1.0]
    return tuple(dict.fromkeys(before + after))


def _names(folder: Path, rank: int, keep: Callable[[dict[str, Any]], bool]) -> tuple[str, ...]:
    return tuple(sorted({e["name"] for e in _events(folder, rank) if keep(e)}))


def _culprits(category: str, folder: Path, rank: int, step: int, kind: str) -> tuple[str, ...]:
    """The op names the injection of ``category`` creates or slows (see synth/training_step.py and
    capture/_gpt.py for what each injection writes)."""
    if category in ("host_pause", "straggler_rank"):
        return _gap_ops(folder, rank, step)
    if category == "dataloader_stall":
        return _names(folder, rank, lambda e: e["name"].startswith("enumerate(DataLoader)"))
    if category == "checkpoint_stall":
        return ("checkpoint_save",)
    if category == "host_sync":
        return ("aten::item", "aten::_local_scalar_dense", "cudaStreamSynchronize")
    if category == "launch_overhead":
        return ("cudaLaunchKernel",)
    if category == "pipeline_bubble":
        return (*_names(folder, rank, lambda e: "SendRecv" in e["name"]), "nccl:send")
    if category == "exposed_communication":
        return _names(folder, rank, lambda e: "AllReduce" in e["name"] or e["name"] in ("nccl:all_reduce",
                                                                                          "gloo:all_reduce"))
    if category == "slow_compute" and kind == "synth":
        compute = ("gemm", "flash")
        return _names(folder, rank, lambda e: e.get("cat") == "kernel" and any(k in e["name"] for k in compute))
    if category == "slow_compute":
        return ("aten::mm", "aten::addmm", "aten::linear")
    raise ValueError(f"no culprit ops known for {category}")


def _expect(job: _Job, folder: Path, ranks: int, step: int, workers: int) -> Expect:
    if not job.injection:
        edits = tuple(EditTruth(e, step, rerun_step_ms(folder, [parse_edit(e)], step, workers)) for e in job.edits)
        return Expect("none", step, (), (), edits)
    category, rest = job.injection.split("@")
    where = rest.split("=")[0].split(":")
    hit = tuple(int(r) for r in where[1].split(",")) if len(where) > 1 else ()
    if category == "pipeline_bubble" and not hit:
        hit = (0,)  # the first stage: the default ranks of a synthetic bubble
    edits = tuple(EditTruth(e, step, rerun_step_ms(folder, [parse_edit(e)], step, workers)) for e in job.edits)
    ops = _culprits(category, folder, hit[0] if hit else 0, step, job.kind)
    return Expect(category, step, () if len(hit) == ranks else hit, ops, edits)


def _make(job: _Job, out_dir: Path, workers: int) -> Case:
    folder = out_dir / "traces" / job.id
    if folder.exists():
        shutil.rmtree(folder)
    fields = {**job.fields, **({"injections": [job.injection]} if job.injection else {})}
    recipe = {job.kind: fields}
    run_recipe(recipe, folder, workers=workers)
    is_synth = job.kind == "synth"
    step = STEP if is_synth else int(job.injection.split("@")[1].split(":")[0].split("=")[0]) if job.injection else 5
    ranks = fields.get("dp", 1) * fields.get("pp", 1) * fields.get("tp", 1) if is_synth else fields["ranks"]
    questions = [DEFAULT_QUESTION] + ([_PARAPHRASES[job.paraphrase]] if job.paraphrase is not None else [])
    case = Case(job.id, folder, tuple(q.replace("{step}", str(step)) for q in questions),
                _expect(job, folder, ranks, step, workers), job.kind, recipe)
    dump_case(case, out_dir / "cases" / f"{job.id}.yaml")
    return case


def _example(out_dir: Path, examples: Path) -> Case | None:
    """The shipped real capture: the analysis's own top finding, host_pause on rank 1 at step 5
    (the injected sleep before rank 1 fetches its batch; rank 0 waits for it in the all-reduce)."""
    source = examples / "gpt_2rank"
    if not source.is_dir():
        log.warning("%s: not found; the case set has no real capture", source)
        return None
    folder = out_dir / "traces" / "gpt_2rank"
    if folder.exists():
        shutil.rmtree(folder)
    shutil.copytree(source, folder)
    ops = _gap_ops(folder, 1, 5)
    case = Case("gpt_2rank", folder, (DEFAULT_QUESTION.replace("{step}", "5"),), Expect("host_pause", 5, (1,), ops),
                "real")
    dump_case(case, out_dir / "cases" / "gpt_2rank.yaml")
    return case


def make_cases(out_dir: Path, *, large: bool = False, workers: int = 2, examples: Path = EXAMPLES,
               progress: Callable[[int, int], None] | None = None) -> list[Case]:
    """Makes the case set in ``out_dir``: traces under ``traces/ID``, case files ``cases/ID.yaml``.

    Same arguments, same traces and truth: every synthetic job is deterministic. The default set takes
    about a minute on 2 cores; ``large`` adds real captures (needs torch, minutes).

    Args:
        large: also more seeds and a real 2-rank CPU capture of each fault a capture can inject.
        workers: processes used to write and read the traces.
        examples: the folder that holds the shipped ``gpt_2rank`` capture.
        progress: called with (cases made, cases to make).

    Raises:
        ConfigError: a recipe that does not fit its job.
        CaptureError: a rank of a capture failed.
    """
    out_dir = Path(out_dir)
    jobs: Sequence[_Job] = _default_jobs() + (_large_jobs() if large else [])
    total = len(jobs) + 1
    cases = []
    for done, job in enumerate(jobs, 1):
        cases.append(_make(job, out_dir, workers))
        if progress:
            progress(done, total)
    if (real := _example(out_dir, examples)) is not None:
        cases.append(real)
    if progress:
        progress(total, total)
    return cases
