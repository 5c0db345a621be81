"""The single training entry point: errors, and the `accelerate launch` path."""

from __future__ import annotations

from pathlib import Path

import pytest

import training
from touchstone.checkpoint import verify_checkpoint
from training.common import TrainingError
from training.train import train

ACCELERATE = Path(training.__file__).parent / "configs" / "accelerate"


def test_unknown_method_and_missing_data_are_clear_errors(tiny_model, tmp_path):
    with pytest.raises(TrainingError, match="unknown training method 'ppo'"):
        train("ppo", data_dir=tmp_path, base=tiny_model, out=tmp_path / "o")
    with pytest.raises(TrainingError, match="sft.parquet: not found"):
        train("sft", data_dir=tmp_path, base=tiny_model, out=tmp_path / "o")
    with pytest.raises(TrainingError, match="not a Hugging Face checkpoint"):
        train("sft", data_dir=tmp_path, base=tmp_path, out=tmp_path / "o")


def test_shipped_accelerate_configs_cover_single_ddp_zero3_fsdp():
    names = {p.stem for p in ACCELERATE.glob("*.yaml")}
    assert {"single_gpu", "multi_gpu", "zero3", "fsdp2", "cpu"} <= names


@pytest.mark.slow
def test_accelerate_launch_trains_the_same_recipe(tiny_model, data_dir, tmp_path):
    out = tmp_path / "ckpt"
    manifest = train(
        "sft",
        data_dir=data_dir,
        base=tiny_model,
        out=out,
        round_key="r0",
        max_steps=1,
        accelerate_config=ACCELERATE / "cpu.yaml",
    )
    assert manifest == verify_checkpoint(out) and manifest.metrics["steps"] == 1
