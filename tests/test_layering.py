"""Architecture rules: imports run one way down the layers, and analysis never imports torch."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "bottleneck_oracle"
LAYERS = ["traces", "dag", "gnn", "graphdb", "retrieval", "agent", "evals", "cli"]
BASE = {"errors", "config", "vocabulary", "__init__", "__main__"}
VOCABULARY = {"types"}  # enums and aliases only: exercised by every other test


def _layer(module: str) -> int | None:
    parts = module.split(".")
    if parts[0] != "bottleneck_oracle" or len(parts) == 1 or parts[1] in BASE:
        return None
    return LAYERS.index(parts[1]) if parts[1] in LAYERS else None


def _imports(path: Path) -> list[str]:
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            out.append(node.module)
        elif isinstance(node, ast.Import):
            out += [a.name for a in node.names]
    return out


def test_no_import_runs_up_the_layers() -> None:
    upward = []
    for path in PACKAGE.rglob("*.py"):
        module = "bottleneck_oracle." + ".".join(path.relative_to(PACKAGE).with_suffix("").parts)
        own = _layer(module)
        if own is None:
            continue
        for imported in _imports(path):
            other = _layer(imported)
            if other is not None and other > own:
                upward.append(f"{module} imports {imported}")
    assert upward == []


def test_every_public_module_has_a_test_file() -> None:
    tests = Path(__file__).resolve().parent
    missing = []
    for path in PACKAGE.rglob("*.py"):
        rel = path.relative_to(PACKAGE)
        if path.name.startswith("_") or path.stem in BASE | VOCABULARY:
            continue
        candidates = [tests / rel.parent / f"test_{path.stem}.py", tests / f"test_{path.stem}.py"]
        if not any(c.exists() for c in candidates):
            missing.append(str(rel))
    assert missing == [], f"modules without a test file: {missing}"


def test_analyze_path_does_not_import_torch() -> None:
    code = (
        "import sys; from bottleneck_oracle.cli import app; from bottleneck_oracle.traces import read_trace; "
        "from bottleneck_oracle.dag.analysis import analyze; "
        f"analyze(read_trace({str(PACKAGE.parents[1] / 'shared/traces/real/hta/cp_simple_add')!r})); "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
