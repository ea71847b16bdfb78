"""Tests for capture/integrations/hf.py: a tiny GPT-2 trained by a real transformers Trainer on CPU."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

pytest.importorskip("transformers")
torch = pytest.importorskip("torch")

from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments  # noqa: E402

from bottleneck_oracle.capture.instrument import StepSchedule  # noqa: E402
from bottleneck_oracle.capture.integrations.hf import ProfilerCallback  # noqa: E402
from bottleneck_oracle.errors import ConfigError  # noqa: E402
from bottleneck_oracle.traces import read_trace  # noqa: E402
from bottleneck_oracle.truth.injection import Injection  # noqa: E402


def _tiny_gpt2() -> GPT2LMHeadModel:
    torch.manual_seed(0)
    config = GPT2Config(n_layer=2, n_embd=32, n_head=2, vocab_size=64, n_positions=32,
                        bos_token_id=0, eos_token_id=0)
    return GPT2LMHeadModel(config)


@pytest.mark.slow
def test_hf_callback_records_a_trainer_run(tmp_path: Path) -> None:
    tokens = torch.randint(64, (64, 16), generator=torch.Generator().manual_seed(0))
    data = [{"input_ids": row, "labels": row} for row in tokens]
    args = TrainingArguments(
        output_dir=str(tmp_path / "run"), max_steps=7, per_device_train_batch_size=4, report_to=[],
        save_strategy="no", logging_strategy="no", use_cpu=True, disable_tqdm=True, dataloader_num_workers=0,
    )
    callback = ProfilerCallback(tmp_path / "traces", schedule=StepSchedule(wait=1, warmup=1, active=3),
                                injections=["host_pause@3=30"])
    Trainer(model=_tiny_gpt2(), args=args, train_dataset=data, callbacks=[callback]).train()

    names = sorted(path.name for path in (tmp_path / "traces").iterdir())
    assert names == ["rank0.steps2-4.et.json.gz", "rank0.steps2-4.pt.trace.json.gz"]
    with gzip.open(tmp_path / "traces" / names[1], "rt") as file:
        events = json.load(file)["traceEvents"]
    steps = {e["name"] for e in events if e.get("ph") == "X" and e["name"].startswith("ProfilerStep#")}
    assert steps == {"ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"}
    assert sum(e.get("name", "").startswith("Optimizer.step#AdamW") for e in events) == 3  # one a step
    trace = read_trace(tmp_path / "traces")
    assert [info.rank for info in trace.ranks] == [0] and len(trace.data_deps) > 0
    assert callback.profiler.applied == (Injection("host_pause", 3, (0,), 30.0),)


def test_hf_callback_checks_its_arguments(tmp_path: Path) -> None:
    with pytest.raises(ConfigError):
        ProfilerCallback(tmp_path, injections=["host_pause@0"])  # step 0 is not recorded
