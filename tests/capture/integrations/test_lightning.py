"""Tests for capture/integrations/lightning.py: a tiny model trained by a real Lightning Trainer on CPU."""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("lightning")
torch = pytest.importorskip("torch")

import lightning.pytorch as pl  # noqa: E402

from bottleneck_oracle.capture.instrument import StepSchedule  # noqa: E402
from bottleneck_oracle.capture.integrations.lightning import ProfilerCallback  # noqa: E402
from bottleneck_oracle.errors import ConfigError  # noqa: E402
from bottleneck_oracle.traces import read_trace  # noqa: E402
from bottleneck_oracle.truth.injection import Injection  # noqa: E402


class _Regression(pl.LightningModule):
    """A two-layer MLP fit to random targets."""

    def __init__(self) -> None:
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.ReLU(), torch.nn.Linear(32, 1))

    def training_step(self, batch: Any, batch_idx: int) -> Any:
        x, y = batch
        return torch.nn.functional.mse_loss(self.net(x), y)

    def configure_optimizers(self) -> Any:
        return torch.optim.SGD(self.parameters(), lr=0.1)


@pytest.mark.slow
def test_lightning_callback_records_a_trainer_run(tmp_path: Path) -> None:
    torch.manual_seed(0)
    data = torch.utils.data.TensorDataset(torch.randn(64, 16), torch.randn(64, 1))
    callback = ProfilerCallback(tmp_path / "traces", schedule=StepSchedule(wait=1, warmup=1, active=3),
                                injections=["straggler_rank@2=30"])
    trainer = pl.Trainer(max_steps=7, accelerator="cpu", devices=1, enable_checkpointing=False, logger=False,
                         enable_progress_bar=False, enable_model_summary=False, callbacks=[callback],
                         default_root_dir=str(tmp_path))
    trainer.fit(_Regression(), torch.utils.data.DataLoader(data, batch_size=4))

    names = sorted(path.name for path in (tmp_path / "traces").iterdir())
    assert names == ["rank0.steps2-4.et.json.gz", "rank0.steps2-4.pt.trace.json.gz"]
    with gzip.open(tmp_path / "traces" / names[1], "rt") as file:
        events = json.load(file)["traceEvents"]
    steps = {e["name"] for e in events if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")}
    assert steps == {"ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"}
    assert sum(e.get("name") == "Optimizer.step#SGD.step" for e in events) == 3  # one per recorded step
    trace = read_trace(tmp_path / "traces")
    assert [info.rank for info in trace.ranks] == [0] and len(trace.data_deps) > 0
    assert callback.profiler.applied == (Injection("straggler_rank", 2, (0,), 30.0),)


def test_lightning_callback_checks_its_arguments(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        ProfilerCallback(tmp_path, injections=["slow_compute@2"])  # not a sleep a profiler can inject
