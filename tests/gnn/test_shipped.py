"""``gnn/shipped.py``: the shipped checkpoint's place and stamp, read without torch, agree with what
``gnn/train.py`` loads."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from bottleneck_oracle.gnn.shipped import SHIPPED_CHECKPOINT, checkpoint_stamp


def test_the_stamp_is_the_loaded_checkpoints_version_and_read_without_torch() -> None:
    from bottleneck_oracle.gnn.train import CHECKPOINT_VERSION, load_checkpoint

    version, written = checkpoint_stamp()
    load_checkpoint(SHIPPED_CHECKPOINT)  # the checkpoint the stamp speaks for loads
    assert version == f"v{CHECKPOINT_VERSION}" and written == (SHIPPED_CHECKPOINT / "model.pt").stat().st_mtime
    probe = "import sys; from bottleneck_oracle.gnn.shipped import checkpoint_stamp; checkpoint_stamp(); " \
            "print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_a_folder_that_is_no_checkpoint_has_no_stamp(tmp_path: Path) -> None:
    assert checkpoint_stamp(tmp_path) == ("", 0.0)
    (tmp_path / "config.json").write_text("{not json")
    assert checkpoint_stamp(tmp_path) == ("", 0.0)
