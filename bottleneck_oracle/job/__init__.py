"""A job across ranks, read one rank at a time: the scan and its rounds, each rank's summary, the job's stitched
critical paths and the JSON shape of a scan.

Imports ``replay/``, ``analysis/`` and below, and the executor; never the graph model or anything above.
"""

from bottleneck_oracle.job.scan import Scan

__all__ = ["Scan"]
