"""What ``oracle ask`` loads: a question whose answer needs no graph model imports neither torch nor
sentence-transformers (the intent model is the numpy encoder with cached example vectors)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

# runs the CLI as the console script does, then says at exit which heavy modules the process imported
_PROBE = (
    "import atexit, sys\n"
    "atexit.register(lambda: print('imported:', sorted(m for m in ('torch', 'sentence_transformers', "
    "'transformers', 'torch_geometric') if m in sys.modules), file=sys.stderr))\n"
    "sys.argv = ['oracle', 'ask', 'Why is step 5 slow?', '--trace', 'gpt_2rank']\n"
    "from bottleneck_oracle.cli.app import main\n"
    "main()\n"
)


def test_why_slow_does_not_import_torch(agent_home: Path, tmp_path: Path) -> None:
    env = {**os.environ, "ORACLE_HOME": str(agent_home), "ORACLE_CACHE": str(tmp_path)}
    for _ in range(2):  # the first run embeds the examples into the (empty) cache, the second reads them
        out = subprocess.run([sys.executable, "-c", _PROBE], capture_output=True, text=True, env=env)
        assert out.returncode == 0, out.stderr
        assert "Step 5 is slow because of a host pause" in out.stdout
        assert "imported: []" in out.stderr, out.stderr[-500:]
    assert list(tmp_path.rglob("*.npy"))  # the intent examples and the cypher templates, cached
