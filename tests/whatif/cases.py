"""Synthetic jobs with one injected fault, made once per test session, kept on disk so that a
what-if can be checked against the job run again."""

from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path

from bottleneck_oracle.dag.analysis import Analysis, analyze
from bottleneck_oracle.synth import SynthConfig, synthesize
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.truth.injection import parse_injection

# One case per injectable category: the fault in step 2, on a job where its detector sees it.
TINY = (("model", "tiny"), ("dp", 4))
PIPELINE = (("model", "tiny"), ("pp", 2), ("microbatches", 4))
GPT2 = (("model", "gpt2-small"), ("dp", 4))
FAULTS = {
    "host_pause": ("host_pause@2:1=30", TINY),
    "straggler_rank": ("straggler_rank@2:3=30", TINY),
    "dataloader_stall": ("dataloader_stall@2:0=30", TINY),
    "checkpoint_stall": ("checkpoint_stall@2=64", TINY),
    "host_sync": ("host_sync@2:1=20", TINY),
    "launch_overhead": ("launch_overhead@2:1=4x", TINY),
    "pipeline_bubble": ("pipeline_bubble@2=30", PIPELINE),
    "slow_compute": ("slow_compute@2:1=3x", GPT2),
    "exposed_communication": ("exposed_communication@2=4096", GPT2),
}


@cache
def job(inject: str = "", settings: tuple[tuple[str, object], ...] = TINY) -> tuple[Path, Analysis]:
    """A 4-step job (cached per arguments): its folder and its analysis."""
    out = Path(tempfile.mkdtemp(prefix="oracle-whatif-"))
    config = SynthConfig(steps=4, injections=(parse_injection(inject),) if inject else (), **dict(settings))
    synthesize(out, config, workers=1)
    return out, analyze(read_trace(out))


def fault(category: str) -> tuple[Path, Analysis]:
    """The job of ``FAULTS[category]``."""
    return job(*FAULTS[category])
