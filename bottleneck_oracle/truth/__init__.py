"""Ground truth shared by the recorders (`capture/`, `synth/`) and read by `gnn/` and the evals: the
injected-fault and edit languages, and the files beside a job's traces (manifest.json, whatif.json).
Imports only the shared base modules.
"""

from bottleneck_oracle.truth.edits import (
    WHATIF_NAME,
    Edit,
    EditKind,
    edit_to_json,
    parse_edit,
    step_rows,
    write_whatif,
)
from bottleneck_oracle.truth.injection import (
    DEFAULT_SIZES,
    UNITS,
    Injection,
    parse_injection,
)
from bottleneck_oracle.truth.manifest import (
    MANIFEST_NAME,
    TRACE_PATTERN,
    GroundTruth,
    read_manifest,
)

__all__ = [
    "DEFAULT_SIZES",
    "MANIFEST_NAME",
    "TRACE_PATTERN",
    "UNITS",
    "WHATIF_NAME",
    "Edit",
    "EditKind",
    "GroundTruth",
    "Injection",
    "edit_to_json",
    "parse_edit",
    "parse_injection",
    "read_manifest",
    "step_rows",
    "write_whatif",
]
