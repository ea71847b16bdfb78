"""Findings: the bottleneck detectors, the rule that bounds what a finding claims, slow steps, the cause of a step.

Reads a graph and its critical paths, never builds one.
Imports ``graph/`` and ``traces/`` only.
"""

from bottleneck_oracle.findings.finding import Finding
from bottleneck_oracle.findings.findings import find_bottlenecks
from bottleneck_oracle.findings.slow_steps import SlowStep, find_slow_steps

__all__ = ["Finding", "SlowStep", "find_bottlenecks", "find_slow_steps"]
