"""``tools/capture_gpu_pairs.py``: the script a lent GPU runs to record real what-if pairs (a job, then the same
job with one thing changed, its edit in the edit language). On a CPU only the data-loader pair can run; it is
recorded small and read back as a real pair. The GPU pairs run where CUDA is, and are skipped here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from bottleneck_oracle.traces import read_trace
from bottleneck_oracle.whatif.accuracy import real_pairs
from tools.capture_gpu_pairs import PAIRS, Job, capture_pair, main


@pytest.mark.slow  # the loader's stall is measured wall time: found only when the cores are not crowded
def test_a_pair_recorded_on_a_cpu_reads_back_as_a_real_pair(tmp_path: Path) -> None:
    small = Job(device="cpu", layers=1, d_model=64, heads=2, seq_len=32, batch_size=4, vocab=256)
    folder = capture_pair("loader_workers", small, tmp_path)
    (entry,) = json.loads((folder / "whatif.json").read_text())["edits"]
    assert entry["edit"]["text"] == "fix dataloader_stall" and (entry["before"], entry["rerun"]) == ("before", "rerun")
    manifest = json.loads((folder / "manifest.json").read_text())
    assert manifest["before"]["num_workers"] == 0 and manifest["after"]["num_workers"] == 4
    assert manifest["torch"] == torch.__version__
    names = {r.path.name for r in read_trace(folder / "before").ranks}
    assert names == {"rank0.pt.trace.json.gz"}
    (pair,) = real_pairs([folder])
    # the single-process loader stalls every step: its fix is predicted to save something, on a step it measured
    assert pair.edit.category == "dataloader_stall" and pair.predicted_ms < pair.recorded_ms
    assert pair.measured_ms > 0


def test_an_unknown_pair_is_refused_with_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main([str(tmp_path), "--pairs", "tf32,fp8"]) == 2
    assert "unknown pair(s) fp8" in capsys.readouterr().err and not any(tmp_path.iterdir())


@pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU here: the GPU pairs are recorded on a lent one")
@pytest.mark.slow
def test_the_gpu_pairs_are_real_pairs_in_their_intervals(tmp_path: Path) -> None:
    from bottleneck_oracle.analysis import analyze
    from bottleneck_oracle.whatif.predict import predict_whatif

    folders = [capture_pair(name, Job(), tmp_path) for name in PAIRS]
    pairs = real_pairs(folders)
    assert {p.name for p in pairs} == set(PAIRS)
    for p in pairs:
        shown = predict_whatif(analyze(read_trace(p.traces)), p.step, [p.edit]).interval
        assert shown is not None and shown.lo_ms <= p.measured_ms <= shown.hi_ms, (p, shown)
