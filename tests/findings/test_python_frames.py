"""A host pause full of recorded Python frames names the functions whose own time filled it."""

from __future__ import annotations

from pathlib import Path

from bottleneck_oracle.analysis.analysis import analyze
from bottleneck_oracle.findings.python_frames import python_self_time
from bottleneck_oracle.graph.types import Bottleneck
from bottleneck_oracle.traces import read_trace
from tests.tracebuilder import op, step, write


def _frame(name: str, ts: float, dur: float) -> dict:
    return op(name, ts, dur, cat="python_function")


def _job(tmp_path: Path, frames: bool) -> Path:
    # one 100 ms step: A, then 94 ms with no torch op, then B; with frames, main() holds the whole
    # pause, normalize (50 ms, 20 of them in astype) and decode (30 ms) ran in it
    events = [step(1, 0, 100_000), op("A", 0, 1_000), op("B", 95_000, 5_000)]
    if frames:
        events += [_frame("train.py(1): main", 500, 99_000),
                   _frame("site-packages/transformers/image_transforms.py(390): normalize", 2_000, 50_000),
                   _frame("<built-in method astype of numpy.ndarray object at 0x7cbf780f01b0>", 10_000, 20_000),
                   _frame("pipelines/video.py(174): decode", 60_000, 30_000)]
    return write(tmp_path / ("frames.json.gz" if frames else "plain.json.gz"), events)


def test_own_time_is_the_frame_less_its_callees(tmp_path: Path) -> None:
    trace = read_trace(_job(tmp_path, frames=True))
    lane = int(trace.events.lane[0])
    own = python_self_time(trace, lane, 1_000_000, 95_000_000)
    assert own == {"image_transforms.py(390): normalize": 30_000_000, "video.py(174): decode": 30_000_000,
                   "<built-in method astype of numpy.ndarray>": 20_000_000}


def test_a_pause_of_python_work_names_it(tmp_path: Path) -> None:
    (pause,) = [f for f in analyze(read_trace(_job(tmp_path, frames=True))).findings
                if f.category == Bottleneck.HOST_PAUSE]
    assert "ran Python but no profiled op for 94.0 ms" in pause.evidence
    assert pause.evidence.endswith("its Python frames' own time: image_transforms.py(390): normalize 30.0 ms, "
                                   "video.py(174): decode 30.0 ms, <built-in method astype of numpy.ndarray> 20.0 ms")


def test_a_pause_with_no_frames_says_no_more(tmp_path: Path) -> None:
    (pause,) = [f for f in analyze(read_trace(_job(tmp_path, frames=False))).findings
                if f.category == Bottleneck.HOST_PAUSE]
    assert "ran no profiled op for 94.0 ms" in pause.evidence and "Python" not in pause.evidence
