"""One trace explained: ``analyze`` (graph, paths, findings, causes), clock alignment, health notes, ``diff`` of two
runs, and the JSON and Perfetto shapes of an analysis.

Imports ``findings/``, ``graph/`` and ``traces/``; never the replay, a job's scan or anything above.
"""

from bottleneck_oracle.analysis.analysis import Analysis, analyze

__all__ = ["Analysis", "analyze"]
