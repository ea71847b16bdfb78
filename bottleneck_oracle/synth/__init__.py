"""The GPU-cluster training simulator: synthetic Kineto traces of LLM training with the ground
truth of every step and fault, what-if re-simulations, and the corpus the graph model learns from.
Imports ``truth/`` and the shared base modules only, as ``capture/``.
"""

from bottleneck_oracle.synth.config import SynthConfig
from bottleneck_oracle.synth.hardware import HARDWARE, Hardware
from bottleneck_oracle.synth.model import MODELS, ModelSpec
from bottleneck_oracle.synth.schedule import SimResult, simulate
from bottleneck_oracle.synth.synthesize import (
    SynthManifest,
    load_synth_manifest,
    synthesize,
)
from bottleneck_oracle.synth.whatif import WhatIfResult, whatif, whatif_to_json

__all__ = [
    "HARDWARE",
    "MODELS",
    "Hardware",
    "ModelSpec",
    "SimResult",
    "SynthConfig",
    "SynthManifest",
    "WhatIfResult",
    "load_synth_manifest",
    "simulate",
    "synthesize",
    "whatif",
    "whatif_to_json",
]
