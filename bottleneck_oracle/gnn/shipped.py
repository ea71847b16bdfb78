"""Where the graph model's shipped checkpoint lies, and what a checkpoint is, read without torch: what a
caller needs to tell whether stored predictions are the model's current ones."""

from __future__ import annotations

import json
from pathlib import Path

__all__ = ["CONFIG_FILE", "SHIPPED_CHECKPOINT", "WEIGHTS_FILE", "checkpoint_stamp"]

SHIPPED_CHECKPOINT = Path(__file__).parent / "checkpoint"
WEIGHTS_FILE, CONFIG_FILE = "model.pt", "config.json"  # a checkpoint folder's (``gnn/train.py`` writes them)


def checkpoint_stamp(path: Path | None = None) -> tuple[str, float]:
    """(version, time its weights were written) of the checkpoint folder ``path`` (the shipped one by
    default); ``("", 0.0)`` when it is not a checkpoint."""
    folder = SHIPPED_CHECKPOINT if path is None else Path(path)
    try:
        version = json.loads((folder / CONFIG_FILE).read_text())["version"]
        return f"v{version}", (folder / WEIGHTS_FILE).stat().st_mtime
    except (OSError, ValueError, KeyError):
        return "", 0.0
