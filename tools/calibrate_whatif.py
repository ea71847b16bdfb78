"""Writes ``bottleneck_oracle/whatif/calibration.json``: the replay's savings against the real re-runs the
project holds (``whatif.json`` under ``tests/data``, one or two folders down: ``whatif/accuracy.py``'s
``real_pairs``), per edit kind. Run after a change to the replay or the pairs;
``tests/whatif/test_calibration.py`` fails while the file and the pairs disagree.

Usage: ``python tools/calibrate_whatif.py [--check]``.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bottleneck_oracle.whatif.accuracy import pair_folders, real_pairs  # noqa: E402
from bottleneck_oracle.whatif.calibration import CALIBRATION, load_ratios, ratios_of, save_ratios  # noqa: E402

PAIRS = Path(__file__).resolve().parents[1] / "tests" / "data"


def measured() -> dict:  # type: ignore[type-arg]
    """The ratios of the pairs as they are now."""
    return ratios_of([(p.name, p.edit.kind.value, str(p.edit), p.recorded_ms, p.predicted_ms, p.measured_ms)
                      for p in real_pairs(pair_folders(PAIRS), root=PAIRS)])


if __name__ == "__main__":
    now = measured()
    if "--check" in sys.argv:
        sys.exit(0 if now == load_ratios() else 1)
    save_ratios(now)
    for kind, r in now.items():
        print(f"{kind}: {len(r.ratios)} pairs, measured/predicted saving {min(r.ratios):.3f} to {max(r.ratios):.3f}")
    print(f"wrote {CALIBRATION}")
