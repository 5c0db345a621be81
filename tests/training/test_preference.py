"""DPO and KTO through TRL on the round's preference data."""

from __future__ import annotations

import pytest
import torch
from click.testing import CliRunner
from datasets import Dataset
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import DPOConfig, KTOConfig

from cli import main
from touchstone.checkpoint import content_hash, verify_checkpoint
from training.common import load_base, read_dataset, trl_args
from training.masked_preference import MaskedDPOTrainer, MaskedKTOTrainer


def _changed(a, b):
    sa, sb = AutoModelForCausalLM.from_pretrained(a).state_dict(), AutoModelForCausalLM.from_pretrained(b).state_dict()
    return any(not torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parametrize("method", ["dpo", "kto"])
def test_cli_trains_a_checkpoint(method, tiny_model, data_dir, tmp_path):
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("max_steps: 2\nper_device_train_batch_size: 2\nlearning_rate: 0.001\n")
    out = tmp_path / "ckpt"
    result = CliRunner().invoke(
        main,
        [
            "train",
            method,
            "--data",
            str(data_dir),
            "--base",
            str(tiny_model),
            "--out",
            str(out),
            "--config",
            str(cfg),
            "--round",
            "r0",
        ],
    )
    assert result.exit_code == 0, result.output
    manifest = verify_checkpoint(out)
    assert manifest.config["method"] == method and manifest.metrics["steps"] == 2
    assert manifest.datasets == {method: content_hash(data_dir / f"{method}.parquet")}
    assert _changed(tiny_model, out)
    assert AutoTokenizer.from_pretrained(out).chat_template == AutoTokenizer.from_pretrained(tiny_model).chat_template


def _decode_where(tok, ids, mask, bit):
    return tok.decode([t for t, m in zip(ids.tolist(), mask.tolist()) if m == bit])


@pytest.mark.parametrize("method", ["dpo", "kto"])
def test_loss_covers_assistant_tokens_only(method, tiny_model, data_dir, tmp_path):
    """The completion mask TRL's loss uses is 1 on the model's tool calls and 0
    on tool observations, the system prompt and the task statement."""
    model, tok = load_base(tiny_model)
    rows = read_dataset(data_dir, method)
    cols = ("prompt", "chosen", "rejected", "tools") if method == "dpo" else ("prompt", "completion", "label", "tools")
    dataset = Dataset.from_list([{k: r[k] for k in cols} for r in rows])
    trainer_cls, cfg_cls = (MaskedDPOTrainer, DPOConfig) if method == "dpo" else (MaskedKTOTrainer, KTOConfig)
    args = trl_args(cfg_cls, tmp_path, {}, max_length=4096, per_device_train_batch_size=2)
    trainer = trainer_cls(model=model, args=args, train_dataset=dataset, processing_class=tok)
    batch = next(iter(trainer.get_train_dataloader()))
    ids, mask = batch["input_ids"][0], batch["completion_mask"][0]
    learned, ignored = _decode_where(tok, ids, mask, 1), _decode_where(tok, ids, mask, 0)
    assert '"name":' in learned and "<tool_call>" in learned  # the model's own calls are scored
    assert "output" not in learned and "<tool_response>" not in learned  # observations are not
    assert "<tool_response>" in ignored and "You are a coding agent." in ignored
    assert 0 < int(mask.sum()) < int(batch["attention_mask"][0].sum())
