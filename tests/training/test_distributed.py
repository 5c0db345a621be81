"""Multi-process training: `accelerate launch` with two CPU processes (gloo)
trains SFT and RL on the tiny model into the same checkpoint format and
manifest as one process."""

from __future__ import annotations

from pathlib import Path

import pytest

import training
from touchstone.checkpoint import verify_checkpoint
from training.train import train

ACCELERATE = Path(training.__file__).parent / "configs" / "accelerate"


def _files(ckpt: Path) -> set[str]:
    return {p.relative_to(ckpt).as_posix() for p in ckpt.iterdir() if p.is_file()}


@pytest.mark.slow
@pytest.mark.parametrize("method", ["sft", "rl"])
def test_two_cpu_processes_train_the_same_checkpoint_format(tiny_model, data_dir, tmp_path, method):
    one = train(method, data_dir=data_dir, base=tiny_model, out=tmp_path / "one", round_key="r0", max_steps=1)
    two = train(
        method,
        data_dir=data_dir,
        base=tiny_model,
        out=tmp_path / "two",
        round_key="r0",
        max_steps=1,
        accelerate_config=ACCELERATE / "cpu_ddp.yaml",
    )
    assert two == verify_checkpoint(tmp_path / "two")
    assert (one.config["processes"], two.config["processes"]) == (1, 2)
    assert _files(tmp_path / "one") == _files(tmp_path / "two")
    assert one.config["trainer"].keys() == two.config["trainer"].keys() and one.metrics.keys() == two.metrics.keys()
    assert two.parent_hash == one.parent_hash and two.datasets == one.datasets and two.metrics["steps"] == 1
    assert two.content_hash != one.parent_hash  # the weights moved
