"""Architecture rules: imports run one way down the layers, no module imports itself back through
others, no module grows past 400 lines, and analysis never imports torch."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "bottleneck_oracle"
# DESIGN's layers, lowest first; packages on one level stand beside each other and never import
# each other (capture/ and synth/ record jobs, graph/ builds the graph of what they recorded: none needs another).
LEVELS = [("traces",), ("truth",), ("capture", "synth", "graph"), ("findings",), ("analysis",), ("replay",), ("job",),
          ("gnn",), ("graphdb",), ("whatif",), ("workspace",),
          ("retrieval",), ("prompts",), ("agent",), ("evals", "server"), ("cli",)]
LEVEL = {name: i for i, names in enumerate(LEVELS) for name in names}
BASE = {"errors", "config", "executor", "heap", "vocabulary", "__init__", "__main__"}  # below every layer
VOCABULARY = {"types"}  # enums and aliases only: exercised by every other test
MAX_LINES = 400
MAX_MODULES = 20  # per folder: past it, a folder holds more than one kind of thing (STYLE S3a)


def module_imports(package: Path) -> dict[str, set[str]]:
    """Module name -> the package's modules it imports (at any depth of its code, lazy ones too)."""
    top = package.name
    modules = {}
    for path in package.rglob("*.py"):
        parts = path.relative_to(package).with_suffix("").parts
        name = ".".join((top, *parts[:-1])) if parts[-1] == "__init__" else ".".join((top, *parts))
        modules[name] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == top:
                for alias in node.names:  # `from pkg import submodule` imports the submodule
                    sub = f"{node.module}.{alias.name}"
                    folder = package.parent.joinpath(*node.module.split("."))
                    if sub in modules or not any(folder.glob(f"{alias.name}.*")):  # else a C extension
                        found.add(sub if sub in modules else node.module)
            elif isinstance(node, ast.Import):
                found |= {a.name for a in node.names if a.name.split(".")[0] == top}
        graph[name] = {m for m in found if m in modules and m != name}
    return graph


def _level(module: str) -> int | None:
    parts = module.split(".")
    if len(parts) == 1 or parts[1] in BASE:
        return None
    return LEVEL.get(parts[1])


def layer_violations(graph: dict[str, set[str]]) -> list[str]:
    """Imports that run up the layers, or across to another package of the same level."""
    bad = []
    for module, imported in sorted(graph.items()):
        own = _level(module)
        for other in sorted(imported):
            level = _level(other)
            if own is None or level is None:
                if own is None and level is not None and module.split(".")[1] in BASE - {"__init__", "__main__"}:
                    bad.append(f"{module} imports {other} (base modules import no layer)")
                continue
            if level > own or (level == own and module.split(".")[1] != other.split(".")[1]):
                bad.append(f"{module} imports {other}")
    return bad


def import_circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected set of two or more modules (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    circles = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                circles.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(circles)


def test_no_import_runs_up_or_across_the_layers() -> None:
    assert layer_violations(module_imports(PACKAGE)) == []


def test_no_import_circles() -> None:
    assert import_circles(module_imports(PACKAGE)) == []


def _write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root / "bottleneck_oracle"


@pytest.mark.parametrize(("files", "expected"), [
    ({"traces/read.py": "from bottleneck_oracle.graph import build\n", "graph/build.py": ""},
     ["bottleneck_oracle.traces.read imports bottleneck_oracle.graph.build"]),
    ({"synth/job.py": "def f():\n    from bottleneck_oracle.capture.run import go\n", "capture/run.py": ""},
     ["bottleneck_oracle.synth.job imports bottleneck_oracle.capture.run"]),
    ({"vocabulary.py": "from bottleneck_oracle.graph import build\n", "graph/build.py": ""},
     ["bottleneck_oracle.vocabulary imports bottleneck_oracle.graph.build (base modules import no layer)"]),
    ({"cli/main.py": "from bottleneck_oracle.graph.build import x\n", "graph/build.py": "from bottleneck_oracle import errors\n",
      "errors.py": ""}, []),
])
def test_the_layer_checker_catches_an_upward_or_sideways_import(tmp_path: Path, files: dict[str, str],
                                                                 expected: list[str]) -> None:
    package = _write(tmp_path, {"bottleneck_oracle/__init__.py": "", **{f"bottleneck_oracle/{k}": v for k, v in files.items()}})
    assert layer_violations(module_imports(package)) == expected


def test_the_circle_checker_finds_a_circle_through_a_lazy_import(tmp_path: Path) -> None:
    package = _write(tmp_path, {
        "bottleneck_oracle/__init__.py": "",
        "bottleneck_oracle/capture/__init__.py": "",
        "bottleneck_oracle/capture/job.py": "from bottleneck_oracle.capture.config import Config\n",
        "bottleneck_oracle/capture/config.py": "def run():\n    from bottleneck_oracle.capture import job\n",
        "bottleneck_oracle/capture/alone.py": "from bottleneck_oracle.capture import config\n",
    })
    assert import_circles(module_imports(package)) == [["bottleneck_oracle.capture.config",
                                                        "bottleneck_oracle.capture.job"]]


def test_no_module_is_over_400_lines() -> None:
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_no_folder_holds_over_20_modules() -> None:
    crowded = {str(d.relative_to(PACKAGE)): n for d in [PACKAGE, *PACKAGE.rglob("*/")]
               if (n := len(list(d.glob("*.py")))) > MAX_MODULES}
    assert crowded == {}


def test_every_package_has_a_layer_and_says_what_it_may_import() -> None:
    packages = {p.parent.name: p for p in PACKAGE.glob("*/__init__.py")}
    assert sorted(set(packages) - set(LEVEL)) == []
    for name, init in packages.items():
        doc = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert doc.count("\n") <= 8 and "mport" in doc, f"{name}/__init__.py: say what it holds and may import"


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
        "from bottleneck_oracle.analysis.analysis import analyze; "
        f"analyze(read_trace({str(PACKAGE.parents[1] / 'shared/traces/real/hta/cp_simple_add')!r})); "
        "assert 'torch' not in sys.modules, 'torch imported'"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
