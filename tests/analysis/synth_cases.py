"""Synthetic jobs for detector tests: generated once per test session, analysed by our own code."""

from __future__ import annotations

import tempfile
from functools import cache
from pathlib import Path

from bottleneck_oracle.analysis.analysis import Analysis, analyze
from bottleneck_oracle.synth import SynthConfig, SynthManifest, synthesize
from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.truth.injection import parse_injection


@cache
def synth_case(model: str, dp: int = 1, tp: int = 1, pp: int = 1, microbatches: int = 1,
               inject: str = "", hardware: str = "H100") -> tuple[Analysis, SynthManifest]:
    """Generates a 4-step job (cached per arguments) and analyses it."""
    out = Path(tempfile.mkdtemp(prefix="oracle-synth-"))
    config = SynthConfig(model=model, hardware=hardware, dp=dp, tp=tp, pp=pp, microbatches=microbatches, steps=4,
                         injections=(parse_injection(inject),) if inject else ())
    manifest = synthesize(out, config)
    return analyze(read_trace(out)), manifest
