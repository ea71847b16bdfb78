"""Synthetic Kineto traces of GPU-cluster LLM training, with the ground truth of every step and fault."""

from bottleneck_oracle.traces.synth.config import SynthConfig
from bottleneck_oracle.traces.synth.hardware import HARDWARE, Hardware
from bottleneck_oracle.traces.synth.model import MODELS, KernelClass, ModelSpec
from bottleneck_oracle.traces.synth.schedule import SimResult, simulate
from bottleneck_oracle.traces.synth.synthesize import SynthManifest, load_synth_manifest, synthesize
from bottleneck_oracle.traces.synth.whatif import Edit, EditKind, WhatIfResult, edit_to_json, parse_edit, whatif, whatif_to_json

__all__ = [
    "HARDWARE",
    "MODELS",
    "Edit",
    "EditKind",
    "Hardware",
    "KernelClass",
    "ModelSpec",
    "SimResult",
    "SynthConfig",
    "SynthManifest",
    "WhatIfResult",
    "edit_to_json",
    "load_synth_manifest",
    "parse_edit",
    "simulate",
    "synthesize",
    "whatif",
    "whatif_to_json",
]
