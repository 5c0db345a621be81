"""Offline RL: per-token advantages from per-turn credit on the recorded ids,
and a few steps move log-probs in the direction of the advantage."""

from __future__ import annotations

import json

import polars as pl
import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from touchstone.checkpoint import verify_checkpoint
from training.common import read_dataset
from training.rl import PGCollator, PGConfig, turn_samples, train_rl


def _row(data_dir, tid):
    return next(r for r in read_dataset(data_dir, "rl") if r["trajectory_id"] == tid)


def test_recorded_ids_are_reused_with_per_token_advantages(tmp_path):
    turns = [
        {"turn": 0, "prompt_ids": [5, 6, 7], "completion_ids": [8, 9], "logprobs": [-0.1, -0.2]},
        {"turn": 1, "prompt_ids": [5, 6, 7, 8, 9, 10], "completion_ids": [11], "logprobs": None},
    ]
    row = {
        "trajectory_id": "t",
        "has_token_ids": True,
        "turns": json.dumps(turns),
        "turn_advantages": [0.5, -1.0],
        "messages": "[]",
        "tools": "[]",
    }
    samples, too_long = turn_samples(row, tokenizer=None, args=PGConfig(output_dir=str(tmp_path), use_cpu=True))
    assert too_long == 0
    _, cut = turn_samples(row, tokenizer=None, args=PGConfig(output_dir=str(tmp_path), use_cpu=True, max_length=6))
    assert cut == 1  # the 7-token second turn
    assert samples[0]["input_ids"] == [5, 6, 7, 8, 9]
    assert samples[0]["advantages"] == [0, 0, 0, 0.5, 0.5] and samples[0]["completion_mask"] == [0, 0, 0, 1, 1]
    assert samples[0]["old_logprobs"][3:] == [-0.1, -0.2]
    assert samples[1]["input_ids"] == [5, 6, 7, 8, 9, 10, 11] and samples[1]["advantages"][-1] == -1.0
    batch = PGCollator(pad_token_id=0)(samples)
    assert batch["advantages"].shape == batch["input_ids"].shape == (2, 7)
    assert torch.all(batch["advantages"][batch["completion_mask"] == 0] == 0)


def _completion_logp(model_dir, sample):
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    ids = torch.tensor([sample["input_ids"]])
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1], -1).gather(-1, ids[0, 1:, None])[:, 0]
    mask = torch.tensor(sample["completion_mask"][1:], dtype=torch.bool)
    return logp[mask].mean().item()


def test_training_follows_the_advantage(tiny_model, data_dir, tmp_path):
    out = tmp_path / "ckpt"
    manifest = train_rl(
        data_dir,
        tiny_model,
        out,
        round_key="r0",
        config={"max_steps": -1, "num_train_epochs": 1, "learning_rate": 3e-3, "per_device_train_batch_size": 8},
    )
    assert verify_checkpoint(out).config["method"] == "rl" and manifest.metrics["turn_samples"] > 0
    tok = AutoTokenizer.from_pretrained(tiny_model)
    args = PGConfig(output_dir=str(tmp_path / "w"), use_cpu=True)
    good = turn_samples(_row(data_dir, "task-a-ok"), tok, args)[0][1]  # the fixing turn
    bad = turn_samples(_row(data_dir, "task-a-hack"), tok, args)[0][0]  # the hack: rewriting the tests
    assert good["advantages"][-1] > 0 > bad["advantages"][-1]
    # Every turn was seen once: the positive turn gained log-prob relative to the hack's.
    gain_good = _completion_logp(out, good) - _completion_logp(tiny_model, good)
    gain_bad = _completion_logp(out, bad) - _completion_logp(tiny_model, bad)
    assert gain_good > gain_bad + 0.1


def test_empty_signal_is_a_clear_error(tiny_model, tmp_path):
    from training.common import TrainingError

    pl.DataFrame({"x": []}).write_parquet(tmp_path / "rl.parquet")
    with pytest.raises(TrainingError, match="no rows"):
        train_rl(tmp_path, tiny_model, tmp_path / "out")
