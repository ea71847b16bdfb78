"""Training-framework callbacks that record traces with ``StepProfiler``: ``hf`` and ``lightning``.

Import the one you use (``from bottleneck_oracle.capture.integrations.hf import ProfilerCallback``);
each needs its framework (``pip install 'bottleneck-oracle[integrations]'``), so nothing is
imported here.
"""

from __future__ import annotations

__all__: list[str] = []
