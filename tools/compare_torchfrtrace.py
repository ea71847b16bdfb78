"""`oracle hang` beside torch's own Flight Recorder analyzer (`torchfrtrace`) on the dump fixtures.

Each fixture runs through torchfrtrace twice: as gloo wrote it, and with the process-group config an NCCL job
writes (gloo names its groups' config "" with no ranks, which stops torchfrtrace with a KeyError). Prints a
Markdown table: `python tools/compare_torchfrtrace.py [tests/data/hangs]`.
"""

from __future__ import annotations

import pickle
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from bottleneck_oracle.analysis.hang import hang_verdict
from bottleneck_oracle.traces.flight_recorder import read_flight_record

FIXTURES = Path(__file__).resolve().parents[1] / "tests" / "data" / "hangs"
TORCHFRTRACE = Path(sys.executable).with_name("torchfrtrace")
PREFIX = "nccl_trace_rank_"


@dataclass(frozen=True)
class Theirs:
    """What torchfrtrace said: the culprit it names, the ranks it calls missing, or how it failed."""

    culprits: tuple[int, ...]
    missing: tuple[int, ...]
    failure: str  # the exception's last line ("" when it ran)

    def text(self) -> str:
        if self.failure:
            return f"fails: {self.failure}"
        if self.culprits:
            return f"culprit {', '.join(map(str, self.culprits))}"
        if self.missing:
            return f"ranks {', '.join(map(str, self.missing))} missing from a collective"
        return "no finding"


def run_torchfrtrace(folder: Path) -> Theirs:
    run = subprocess.run([str(TORCHFRTRACE), str(folder), "--prefix", PREFIX], capture_output=True, text=True,
                         timeout=120)
    text = run.stdout + run.stderr
    culprits = tuple(sorted({int(r) for r in re.findall(r"Culprit rank (\d+)", text)}))
    missing = tuple(sorted({int(r) for m in re.findall(r"missing ranks: \{([\d, ]+)\}", text)
                            for r in m.split(",")}))
    failure = ""
    if run.returncode != 0:
        lines = [line for line in run.stderr.splitlines() if line.strip()]
        failure = lines[-1] if lines else f"exit code {run.returncode}"
    return Theirs(culprits, missing, failure)


def with_group_config(folder: Path, out: Path) -> Path:
    """A copy of the pickle dumps whose config names every group and its ranks, as an NCCL job's does (the
    ranks as `oracle hang` worked them out from the entries)."""
    groups = read_flight_record(folder).groups
    out.mkdir(parents=True)
    for dump in sorted(folder.glob(f"{PREFIX}*")):
        raw = pickle.loads(dump.read_bytes())  # our own fixtures: trusted
        raw["pg_config"] = {name: {"name": name, "desc": g.description, "ranks": str(list(g.ranks))}
                            for name, g in groups.items()}
        (out / dump.name).write_bytes(pickle.dumps(raw))
    return out


def ours(folder: Path) -> str:
    v = hang_verdict(read_flight_record(folder))
    if v.verdict != "hang":
        return v.verdict
    seq = f"#{v.collective['seq']} {v.collective['op']}"
    culprit = ", ".join(map(str, v.culprit_ranks)) or "none"
    return f"hang in {seq}, culprit {culprit} ({v.cause})"


def rows(root: Path = FIXTURES) -> list[tuple[str, str, str, str]]:
    out = []
    with tempfile.TemporaryDirectory() as tmp:
        for folder in sorted(p for p in root.iterdir() if (p / "manifest.json").exists()):
            raw = run_torchfrtrace(folder)
            pickled = any(folder.glob(f"{PREFIX}[0-9]"))
            nccl = run_torchfrtrace(with_group_config(folder, Path(tmp) / folder.name)).text() if pickled else "-"
            out.append((folder.name, ours(folder), raw.text(), nccl))
        shutil.rmtree(tmp, ignore_errors=True)
    return out


def main() -> None:
    root = Path(sys.argv[1]) if len(sys.argv) > 1 else FIXTURES
    print("| fixture | oracle hang | torchfrtrace | torchfrtrace, NCCL-style group config |")
    print("|---|---|---|---|")
    for row in rows(root):
        print("| " + " | ".join(cell.replace("|", "\\|") for cell in row) + " |")


if __name__ == "__main__":
    main()
