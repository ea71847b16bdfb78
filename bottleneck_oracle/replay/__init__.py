"""The replay engine: edits (``scale``, ``remove``, ``set``, ``fix``, structural) compiled onto a point graph and
replayed, for a whole trace or one rank at a time; every what-if, ``optimize`` and ``scan --whatif`` use it.

Imports ``analysis/`` and below; never a job's scan, the graph model or anything above.
"""

from bottleneck_oracle.replay.engine import Edit, ReplayResult, node_speedups, replay, weights_with

__all__ = ["Edit", "ReplayResult", "node_speedups", "replay", "weights_with"]
