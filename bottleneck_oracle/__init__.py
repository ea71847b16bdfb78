"""Bottleneck Oracle: find what makes a training step slow from its profiler traces."""

__version__ = "0.1.0"

__all__ = ["__version__"]
