"""SFT: the weighted batch masks everything but assistant tokens, and training
changes the weights, lowers the loss on the data, and writes a checkpoint."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from touchstone.agent.policies.spec import PolicySpec
from touchstone.agent.policies import make_policy
from touchstone.episode.tools import TOOL_SCHEMAS
from touchstone.episode.trajectory import Sampling
from touchstone.checkpoint import content_hash, verify_checkpoint
from training.common import TrainingError, read_dataset
from training.sft import (
    WeightedCollator,
    assistant_spans,
    tokenize_dataset,
    tokenize_row,
    train_sft,
    turn_windows,
    training_template,
)

from tests.serving import transformers_serve


def _rows(data_dir):
    return read_dataset(data_dir, "sft")


def test_masked_tokens_have_zero_weight_in_the_built_batch(tiny_model, data_dir):
    tok = AutoTokenizer.from_pretrained(tiny_model)
    template = training_template(tok)
    rows = _rows(data_dir)
    examples = [tokenize_row(r, tok, template) for r in rows]
    batch = WeightedCollator(pad_token_id=tok.pad_token_id)(examples)
    weights, labels = batch["token_weights"], batch["labels"]
    assert torch.all(weights[labels == -100] == 0)  # prompt, tool outputs, padding
    assert torch.all(weights[labels != -100] > 0)
    # Each assistant turn's tokens carry exactly that turn's weight.
    detour = next(i for i, r in enumerate(rows) if r["trajectory_id"].endswith("detour"))
    ex = examples[detour]
    spans = assistant_spans([int(l != -100) for l in ex["labels"]])
    assert [ex["token_weights"][s] for s, _ in spans] == rows[detour]["turn_weights"]
    text = tok.decode(ex["input_ids"][spans[0][0] : spans[0][1]])
    assert '"name": "bash"' in text and "ls -la" in text
    tool_output = tok.decode([t for t, l in zip(ex["input_ids"], ex["labels"]) if l == -100])
    assert "bash output 0" in tool_output and "You are a coding agent." in tool_output


def test_a_turn_of_weight_zero_is_context_only(tiny_model, data_dir):
    """A malformed call kept for context (weight 0) gets no labels, so it neither
    counts in the loss's token count nor opens a turn window of its own."""
    tok = AutoTokenizer.from_pretrained(tiny_model)
    template = training_template(tok)
    row = next(r for r in _rows(data_dir) if r["trajectory_id"].endswith("detour"))
    trained = assistant_spans([int(l != -100) for l in tokenize_row(row, tok, template)["labels"]])
    ex = tokenize_row({**row, "turn_weights": [0.0, *row["turn_weights"][1:]]}, tok, template)
    assert assistant_spans([int(l != -100) for l in ex["labels"]]) == trained[1:]
    assert not any(ex["token_weights"][trained[0][0] : trained[0][1]])


def test_long_rows_are_split_into_turn_windows_that_train_every_turn_once(tiny_model, data_dir):
    tok = AutoTokenizer.from_pretrained(tiny_model)
    rows = _rows(data_dir)
    full = [tokenize_row(r, tok, training_template(tok)) for r in rows]
    longest = max(range(len(full)), key=lambda i: len(full[i]["input_ids"]))
    row = full[longest]
    spans = assistant_spans([int(label != -100) for label in row["labels"]])
    assert len(spans) >= 3
    # A window that holds the first two turns but not the third: the third needs a window of its own.
    cut = spans[2][0] - 1
    windows = turn_windows(row, cut)
    assert len(windows) >= 2 and all(len(w["input_ids"]) <= cut for w in windows)
    trained = []
    for w in windows:
        # the window is a slice of the row: find where, then map its labelled tokens back
        ids = w["input_ids"]
        start = next(i for i in range(len(row["input_ids"])) if row["input_ids"][i : i + len(ids)] == ids)
        marked = [start + j for j, label in enumerate(w["labels"]) if label != -100]
        assert all(w["labels"][j - start] == row["labels"][j] for j in marked)
        assert all(w["token_weights"][j - start] == row["token_weights"][j] for j in marked)
        assert all(w["token_weights"][j] == 0 for j, label in enumerate(w["labels"]) if label == -100)
        trained += marked
    # every assistant token of the row is trained exactly once, and a later window ends with its turn
    assert sorted(trained) == [j for s, e in spans for j in range(s, e)]
    assert windows[-1]["labels"][-1] != -100 or windows[-1]["labels"][-2] != -100
    dataset, split = tokenize_dataset(rows, tok, cut)
    assert split >= 1 and len(dataset) > len(rows)
    assert turn_windows(row, len(row["input_ids"])) == [row]
    # a turn longer than the window keeps its first tokens
    short = turn_windows(row, 5)
    assert len(short) == len(spans) and all(len(w["input_ids"]) == 5 and w["labels"][0] != -100 for w in short)
    tok.chat_template = "{% for m in messages %}{{ m.content }}{% endfor %}"
    with pytest.raises(TrainingError, match="no assistant masks"):
        tokenize_dataset(rows, tok, 4096)


def _data_loss(model_dir, rows):
    model = AutoModelForCausalLM.from_pretrained(model_dir)
    tok = AutoTokenizer.from_pretrained(model_dir)
    template = training_template(tok)
    total = 0.0
    with torch.no_grad():
        for r in rows:
            ex = tokenize_row(r, tok, template)
            out = model(input_ids=torch.tensor([ex["input_ids"]]), labels=torch.tensor([ex["labels"]]))
            total += out.loss.item()
    return total / len(rows)


@pytest.fixture(scope="module")
def sft_ckpt(tiny_model, data_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("sft") / "ckpt"
    manifest = train_sft(
        data_dir,
        tiny_model,
        out,
        round_key="r0",
        config={"max_steps": 8, "learning_rate": 3e-3, "per_device_train_batch_size": 2},
    )
    return out, manifest


def test_training_changes_weights_lowers_loss_and_writes_checkpoint(sft_ckpt, tiny_model, data_dir):
    out, manifest = sft_ckpt
    rows = _rows(data_dir)
    assert _data_loss(out, rows) < _data_loss(tiny_model, rows) - 0.5
    before = AutoModelForCausalLM.from_pretrained(tiny_model).state_dict()
    after = AutoModelForCausalLM.from_pretrained(out).state_dict()
    assert any(not torch.equal(before[k], after[k]) for k in before)
    assert verify_checkpoint(out) == manifest
    assert manifest.round == "r0" and manifest.parent_hash == content_hash(tiny_model)
    assert manifest.datasets == {"sft": content_hash(data_dir / "sft.parquet")}
    assert manifest.config["method"] == "sft" and manifest.metrics["steps"] == 8
    assert manifest.metrics["rows_split"] == 0
    # The next round starts from this tokenizer: TRL must still recognise its template.
    assert AutoTokenizer.from_pretrained(out).chat_template == AutoTokenizer.from_pretrained(tiny_model).chat_template
    assert list((out / "logs").glob("events.out.tfevents.*"))
    assert json.loads((out / "checkpoint.json").read_text())["content_hash"] == content_hash(out)


def test_the_same_training_elsewhere_has_the_same_hash(sft_ckpt, tiny_model, data_dir, tmp_path):
    # Training is seeded: the same data, base and settings in another directory (another
    # data root) give the same weights, and the checkpoint's hash must say so.
    out, manifest = sft_ckpt
    config = {"max_steps": 8, "learning_rate": 3e-3, "per_device_train_batch_size": 2}
    again = train_sft(data_dir, tiny_model, tmp_path / "elsewhere", round_key="r0", config=config)
    assert again.content_hash == manifest.content_hash
    assert (out / "training_args.bin").read_bytes() != (tmp_path / "elsewhere" / "training_args.bin").read_bytes()


def test_trained_checkpoint_drives_the_hf_policy(sft_ckpt):
    out, manifest = sft_ckpt
    policy = make_policy(PolicySpec.parse(f"hf:{out}"), Sampling(temperature=1.0, max_tokens=16, seed=0))
    assert policy.checkpoint_hash == manifest.content_hash
    messages = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Fix calc.py."}]
    turn = policy.episode(seed=0, max_turns=2).act(messages, TOOL_SCHEMAS)
    assert turn.message["role"] == "assistant" and 0 < len(turn.completion_ids) <= 16


@pytest.mark.slow
def test_trained_checkpoint_serves_with_transformers_serve(sft_ckpt):
    out, _ = sft_ckpt
    with transformers_serve(out, timeout_s=180) as base_url:
        policy = make_policy(PolicySpec.parse(f"openai:{base_url}#{out}"), Sampling(max_tokens=8, seed=0))
        messages = [{"role": "system", "content": "You are a coding agent."}, {"role": "user", "content": "Fix it."}]
        turn = policy.episode(seed=0, max_turns=2).act(messages, TOOL_SCHEMAS)
        assert turn.message["role"] == "assistant"


def test_trl_cli_trains_on_a_round_without_conversion(tiny_model, data_dir, tmp_path):
    """TRL's own `trl sft` reads a round's training_data directory as it is
    (the dataset card names one config per file) and learns from it."""
    out = tmp_path / "trl"
    cmd = [
        str(Path(sys.executable).parent / "trl"),
        "sft",
        "--model_name_or_path",
        str(tiny_model),
        "--dataset_name",
        str(data_dir),
        "--dataset_config",
        "sft",
        "--output_dir",
        str(out),
        "--max_steps",
        "2",
        "--per_device_train_batch_size",
        "2",
        "--learning_rate",
        "1e-3",
        "--assistant_only_loss",
        "true",
        "--max_length",
        "4096",
        "--use_cpu",
        "--report_to",
        "none",
    ]
    run = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    trained = AutoModelForCausalLM.from_pretrained(out).state_dict()
    base = AutoModelForCausalLM.from_pretrained(tiny_model).state_dict()
    assert any(not torch.equal(trained[k], base[k]) for k in base)
