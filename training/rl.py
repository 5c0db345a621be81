"""Offline policy gradient on the round's labelled trajectories with per-token
advantages (a TRL-style config + trainer pair).

Each assistant turn is one sample: the exact prompt ids the policy saw and the
completion ids it sampled (recorded by the agent; no re-tokenization), every
completion token carrying the turn's advantage A_t (docs/CREDIT.md). The loss
is GRPO's clipped surrogate, per token:

    ratio = exp(logp - logp_old),   loss = -min(ratio * A, clip(ratio, 1-eps, 1+eps) * A)

with logp_old the log-probabilities recorded at sampling time, so stale
(off-policy) samples are clipped instead of trusted. Runs recorded without
token ids (teacher or API policies) are tokenized from their messages with the
base tokenizer's chat template, and have no logp_old (ratio = 1, plain policy
gradient). For online GRPO with the sandbox as environment see training/online.py.

Why not a `GRPOTrainer` subclass: its training step is built around generating
a group per prompt (sampler repeats prompts, `_generate_and_score_completions`
produces the batch); feeding it recorded turns would mean replacing most of
it. This trainer keeps TRL's shape (a config dataclass + a `Trainer`
subclass, TRL's padding helper) and GRPO's loss.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from tqdm import tqdm
from transformers import Trainer, TrainingArguments

from touchstone.data.inputs import DataError, trl_messages
from touchstone.checkpoint import CheckpointManifest
from training.common import (
    TrainingError,
    dataset_hashes,
    finish,
    load_base,
    load_overrides,
    read_dataset,
    right_pad,
    tensorboard,
    trl_args,
)


@dataclass
class PGConfig(TrainingArguments):
    epsilon: float = field(default=0.2, metadata={"help": "Clipping range of the probability ratio."})
    max_length: int = field(default=4096, metadata={"help": "Drop turns whose prompt + completion is longer."})
    temperature: float = field(default=1.0, metadata={"help": "Sampling temperature of the recorded runs."})
    min_abs_advantage: float = field(default=1e-6, metadata={"help": "Skip turns with no advantage signal."})


def _rendered_turns(row: dict[str, Any], tokenizer) -> list[tuple[list[int], list[int]]]:
    """(prompt_ids, completion_ids) per assistant turn from the chat template,
    for runs recorded without token ids. The template is prefix-preserving, so
    the prompt is a prefix of prompt + completion."""
    messages, tools = trl_messages(row["messages"]), row["tools"]
    turns = []
    for idx, msg in enumerate(messages):
        if msg["role"] != "assistant":
            continue
        prompt = tokenizer.apply_chat_template(
            messages[:idx], tools=tools, add_generation_prompt=True, tokenize=True, return_dict=False
        )
        full = tokenizer.apply_chat_template(messages[: idx + 1], tools=tools, tokenize=True, return_dict=False)
        if full[: len(prompt)] != prompt:
            raise TrainingError(f"trajectory {row['trajectory_id']}: chat template is not prefix-preserving")
        turns.append((list(prompt), list(full[len(prompt) :])))
    return turns


def turn_samples(row: dict[str, Any], tokenizer, args: PGConfig) -> tuple[list[dict[str, list]], int]:
    """One sample per assistant turn with a non-zero advantage, and the number
    of such turns skipped for exceeding max_length."""
    advantages = row["turn_advantages"]
    if row["has_token_ids"]:
        recorded = json.loads(row["turns"])
        pairs = [(t["prompt_ids"], t["completion_ids"]) for t in recorded]
        old = [t.get("logprobs") for t in recorded]
    else:
        pairs = _rendered_turns(row, tokenizer)
        old = [None] * len(pairs)
    if len(pairs) != len(advantages):
        raise TrainingError(f"trajectory {row['trajectory_id']}: {len(pairs)} turns but {len(advantages)} advantages")
    samples, too_long = [], 0
    for (prompt, completion), adv, logps in zip(pairs, advantages, old):
        if abs(adv) < args.min_abs_advantage or not completion:
            continue
        if len(prompt) + len(completion) > args.max_length:
            too_long += 1
            continue
        n = len(completion)
        samples.append(
            {
                "input_ids": list(prompt) + list(completion),
                "completion_mask": [0] * len(prompt) + [1] * n,
                "advantages": [0.0] * len(prompt) + [adv] * n,
                # NaN = not recorded: the loss then uses the current log-prob (ratio 1).
                "old_logprobs": [0.0] * len(prompt)
                + (list(logps) if logps and len(logps) == n else [float("nan")] * n),
            }
        )
    return samples, too_long


def build_dataset(rows: list[dict[str, Any]], tokenizer, args: PGConfig) -> tuple[Dataset, int]:
    """Turn samples of every run, and how many turns exceeded max_length."""
    samples, too_long = [], 0
    for row in tqdm(rows, desc="rl turn samples", unit="run"):
        try:
            more, skipped = turn_samples(row, tokenizer, args)
        except DataError:  # malformed tool-call arguments in a run without ids: cannot render it faithfully
            continue
        samples += more
        too_long += skipped
    if not samples:
        raise TrainingError(f"no RL turn has an advantage signal within max_length={args.max_length}")
    return Dataset.from_list(samples), too_long


class PGCollator:
    def __init__(self, pad_token_id: int):
        self.pad_token_id = pad_token_id

    def __call__(self, examples: list[dict[str, Any]]) -> dict[str, torch.Tensor]:
        def stack(key, value, dtype):
            return right_pad([torch.tensor(e[key], dtype=dtype) for e in examples], value)

        ids = stack("input_ids", self.pad_token_id, torch.long)
        return {
            "input_ids": ids,
            "attention_mask": right_pad([torch.ones(len(e["input_ids"]), dtype=torch.long) for e in examples], 0),
            "completion_mask": stack("completion_mask", 0, torch.float32),
            "advantages": stack("advantages", 0.0, torch.float32),
            "old_logprobs": stack("old_logprobs", 0.0, torch.float32),
        }


class PGTrainer(Trainer):
    """Clipped per-token policy gradient; `args` is a `PGConfig`."""

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        logits = model(input_ids=inputs["input_ids"], attention_mask=inputs["attention_mask"]).logits[:, :-1]
        logits = logits / self.args.temperature
        targets = inputs["input_ids"][:, 1:]
        logp = torch.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        mask = inputs["completion_mask"][:, 1:]
        adv = inputs["advantages"][:, 1:]
        old = inputs["old_logprobs"][:, 1:]
        old = torch.where(torch.isnan(old), logp.detach(), old)
        ratio = torch.exp(logp - old)
        eps = self.args.epsilon
        per_token = -torch.minimum(ratio * adv, torch.clamp(ratio, 1 - eps, 1 + eps) * adv)
        loss = (per_token * mask).sum() / mask.sum().clamp(min=1)
        return (loss, {"logp": logp}) if return_outputs else loss


def train_rl(
    data_dir: str | Path,
    base: str | Path,
    out: str | Path,
    round_key: str | None = None,
    config: str | Path | dict | None = None,
) -> CheckpointManifest:
    out = Path(out)
    model, tokenizer = load_base(base, config)
    with tempfile.TemporaryDirectory(prefix="touchstone-rl-") as work:
        args = trl_args(PGConfig, Path(work), load_overrides(config), learning_rate=1e-4, remove_unused_columns=False)
        dataset, too_long = build_dataset(read_dataset(data_dir, "rl"), tokenizer, args)
        trainer = PGTrainer(
            model=model,
            args=args,
            train_dataset=dataset,
            processing_class=tokenizer,
            data_collator=PGCollator(tokenizer.pad_token_id),
            callbacks=[tensorboard(out)],
        )
        result = trainer.train()
        return finish(
            trainer,
            out,
            base=base,
            round_key=round_key,
            datasets=dataset_hashes(data_dir, ["rl"]),
            method="rl",
            metrics={
                "train_loss": result.training_loss,
                "steps": result.global_step,
                "turn_samples": len(dataset),
                "turns_over_max_length": too_long,
            },
        )
