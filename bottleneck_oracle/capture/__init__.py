"""Recording real training jobs: the step profiler users put in their loops, framework callbacks,
and our own GPT job captured over gloo with injected faults and re-captures for what-if truth.

Torch (the `capture` extra) is imported only when a job runs, so configs and manifests work without it.
Imports ``truth/`` and the shared base modules only: it records traces, never reads a graph.
"""

from bottleneck_oracle.capture.capture import (
    ET_PATTERN,
    Manifest,
    capture,
    load_manifest,
)
from bottleneck_oracle.capture.config import CATEGORIES, CaptureConfig, parse_injection

__all__ = ["CATEGORIES", "ET_PATTERN", "CaptureConfig", "Manifest", "capture", "load_manifest", "parse_injection"]
