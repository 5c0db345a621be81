"""SFT: the weighted batch masks everything but assistant tokens, and training
changes the weights, lowers the loss on the data, and writes a checkpoint."""

from __future__ import annotations

import json

import polars as pl
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl.chat_template_utils import get_training_chat_template

from training.checkpoint import content_hash, verify_checkpoint
from training.sft import WeightedCollator, assistant_spans, tokenize_row, train_sft


def _rows(data_dir):
    return pl.read_parquet(data_dir / "sft.parquet").to_dicts()


def test_masked_tokens_have_zero_weight_in_the_built_batch(tiny_model, data_dir):
    tok = AutoTokenizer.from_pretrained(tiny_model)
    template = get_training_chat_template(tok)
    rows = _rows(data_dir)
    examples = [tokenize_row(r, tok, template, 4096) for r in rows]
    batch = WeightedCollator(pad_token_id=tok.pad_token_id)(examples)
    weights, labels = batch["token_weights"], batch["labels"]
    assert torch.all(weights[labels == -100] == 0)  # prompt, tool outputs, padding
    assert torch.all(weights[labels != -100] > 0)
    # Each assistant turn's tokens carry exactly that turn's weight.
    detour = next(i for i, r in enumerate(rows) if r["trajectory_id"].endswith("detour"))
    ex = examples[detour]
    spans = assistant_spans([int(l != -100) for l in ex["labels"]])
    assert [ex["token_weights"][s] for s, _ in spans] == rows[detour]["turn_weights"]
    text = tok.decode(ex["input_ids"][spans[0][0]:spans[0][1]])
    assert '"name": "bash"' in text and "ls -la" in text
    tool_output = tok.decode([t for t, l in zip(ex["input_ids"], ex["labels"]) if l == -100])
    assert "bash output 0" in tool_output and "You are a coding agent." in tool_output


def _data_loss(model_dir, rows):
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tok = AutoTokenizer.from_pretrained(model_dir)
    template = get_training_chat_template(tok)
    total = 0.0
    with torch.no_grad():
        for r in rows:
            ex = tokenize_row(r, tok, template, 4096)
            out = model(input_ids=torch.tensor([ex["input_ids"]]), labels=torch.tensor([ex["labels"]]))
            total += out.loss.item()
    return total / len(rows)


def test_training_changes_weights_lowers_loss_and_writes_checkpoint(tiny_model, data_dir, tmp_path):
    out = tmp_path / "ckpt"
    manifest = train_sft(data_dir, tiny_model, out, round_key="r0",
                         config={"max_steps": 8, "learning_rate": 3e-3, "per_device_train_batch_size": 2})
    rows = _rows(data_dir)
    assert _data_loss(out, rows) < _data_loss(tiny_model, rows) - 0.5
    before = AutoModelForCausalLM.from_pretrained(tiny_model).state_dict()
    after = AutoModelForCausalLM.from_pretrained(out).state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    assert verify_checkpoint(out) == manifest
    assert manifest.round == "r0" and manifest.parent_hash == content_hash(tiny_model)
    assert manifest.datasets == {"sft": content_hash(data_dir / "sft.parquet")}
    assert manifest.config["method"] == "sft" and manifest.metrics["steps"] == 8
    assert list((out / "logs").glob("events.out.tfevents.*"))
    assert json.loads((out / "checkpoint.json").read_text())["content_hash"] == content_hash(out)
