"""Synthetic jobs with one injected fault, made once per test session, kept on disk so that a
what-if can be checked against the job run again."""

from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path

from bottleneck_oracle.analysis.analysis import Analysis, analyze
from bottleneck_oracle.synth import SynthConfig, synthesize
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.truth.injection import parse_injection
from bottleneck_oracle.whatif.accuracy import FAULT_JOBS

TINY = (("model", "tiny"), ("dp", 4))
GPT2 = (("model", "gpt2-small"), ("dp", 4))
# One case per injectable category: the fault in step 2, on a job where its detector sees it.
FAULTS = {category: (inject, tuple((k, v) for k, v in settings.items() if k != "steps"))
          for category, (inject, settings) in FAULT_JOBS.items()}


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
