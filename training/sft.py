"""SFT on accepted trajectories with TRL's `SFTTrainer`: loss on the model's
own (assistant) tokens only, each token weighted by its turn's credit weight.

Tokenization is done here, not by TRL, because the per-turn weights must be
laid onto the tokens: the training chat template marks assistant spans
(`return_assistant_tokens_mask`), and the k-th contiguous span is turn k.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import torch
from datasets import Dataset
from tqdm import tqdm
from trl import SFTConfig, SFTTrainer
from trl.chat_template_utils import get_training_chat_template
from trl.trainer.sft_trainer import DataCollatorForLanguageModeling

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
from touchstone.checkpoint import CheckpointManifest


def assistant_spans(mask: list[int]) -> list[tuple[int, int]]:
    """[start, end) of each contiguous run of 1s."""
    spans, start = [], None
    for i, bit in enumerate(mask + [0]):
        if bit and start is None:
            start = i
        elif not bit and start is not None:
            spans.append((start, i))
            start = None
    return spans


def tokenize_row(row: dict[str, Any], tokenizer, template: str) -> dict[str, list]:
    """input_ids, labels (-100 outside assistant turns and in turns of weight 0)
    and token_weights (0 outside assistant turns, the turn's weight inside)."""
    enc = tokenizer.apply_chat_template(
        row["messages"],
        tools=row["tools"],
        chat_template=template,
        return_assistant_tokens_mask=True,
        return_dict=True,
    )
    ids, mask = list(enc["input_ids"]), list(enc["assistant_masks"])
    spans = assistant_spans(mask)
    weights = row["turn_weights"]
    if len(spans) != len(weights):
        raise TrainingError(
            f"trajectory {row['trajectory_id']}: {len(spans)} assistant spans in the rendered chat "
            f"but {len(weights)} turn weights"
        )
    token_weights = [0.0] * len(ids)
    for (start, end), w in zip(spans, weights):
        token_weights[start:end] = [w] * (end - start)
    # A turn of weight 0 (a malformed call, touchstone.data.sft) is context: no labels, no window of its own.
    labels = [t if m and w > 0 else -100 for t, m, w in zip(ids, mask, token_weights)]
    return {"input_ids": ids, "labels": labels, "token_weights": token_weights}


def training_template(tokenizer) -> str:
    """TRL's training variant of the base chat template (with `{% generation %}`
    markers), or the template itself when it already has them."""
    try:
        return get_training_chat_template(tokenizer) or tokenizer.chat_template
    except ValueError as exc:
        raise TrainingError(f"base tokenizer: no assistant masks for its chat template: {exc}") from None


def turn_windows(example: dict[str, list], max_length: int) -> list[dict[str, list]]:
    """A tokenized row longer than `max_length`, split at turn boundaries into
    windows of at most `max_length` tokens, so every assistant turn is trained
    once: the first window is the row's start; each later one ends with the
    first turn not yet trained and holds as much of the conversation before it
    as fits. A window's labels and weights cover only the turns it trains (the
    context before them is context). A turn longer than `max_length` keeps its
    first `max_length` tokens. Why: cutting a long row to its start threw away
    every turn after the first observation (a test run's output alone can
    exceed 2048 tokens), so a model never learned what to do after a tool's
    answer (docs/TRAINING.md, docs/EXPERIMENTS.md)."""
    n = len(example["input_ids"])
    if n <= max_length:
        return [example]
    spans = assistant_spans([int(label != -100) for label in example["labels"]])
    windows, trained = [], 0  # spans[:trained] are trained
    start, end = 0, max_length  # the row's start first
    while trained < len(spans):
        first, last = spans[trained]
        if last - first > max_length:  # a turn longer than a window: its first max_length tokens
            windows.append(_window(example, first, first + max_length, [spans[trained]]))
            trained += 1
        else:
            inside = [i for i in range(trained, len(spans)) if spans[i][0] >= start and spans[i][1] <= end]
            if inside:
                windows.append(_window(example, start, end, [spans[i] for i in inside]))
                trained = inside[-1] + 1
        if trained < len(spans):  # the next window ends with the first turn not yet trained
            end = spans[trained][1]
            start = max(0, end - max_length)
    return windows


def _window(example: dict[str, list], start: int, end: int, spans: list[tuple[int, int]]) -> dict[str, list]:
    """Tokens [start, end) of `example`, with labels and weights kept only on `spans`."""
    keep = [False] * (end - start)
    for s, e in spans:
        for j in range(max(s, start), min(e, end)):
            keep[j - start] = True
    labels = example["labels"][start:end]
    weights = example["token_weights"][start:end]
    return {
        "input_ids": example["input_ids"][start:end],
        "labels": [t if k else -100 for t, k in zip(labels, keep)],
        "token_weights": [w if k else 0.0 for w, k in zip(weights, keep)],
    }


def tokenize_dataset(rows: list[dict[str, Any]], tokenizer, max_length: int) -> tuple[Dataset, int]:
    """Tokenized rows, a row longer than max_length split into turn windows
    (`turn_windows`), and how many rows were split. A window left without any
    assistant token is not kept."""
    template = training_template(tokenizer)
    examples, split = [], 0
    for row in tqdm(rows, desc="tokenize sft", unit="row"):
        windows = turn_windows(tokenize_row(row, tokenizer, template), max_length)
        split += len(windows) > 1
        examples += [w for w in windows if any(label != -100 for label in w["labels"])]
    if not examples:
        raise TrainingError(f"no SFT row has an assistant token within max_length={max_length}")
    return Dataset.from_list(examples), split


class WeightedCollator(DataCollatorForLanguageModeling):
    """TRL's LM collator plus a padded `token_weights` tensor (0 on padding)."""

    def torch_call(self, examples: list[dict[str, Any]]) -> dict[str, Any]:
        if self.padding_free:
            raise TrainingError("per-token weights need padded batches; set padding_free=False")
        out = super().torch_call(examples)
        weights = [torch.tensor(e["token_weights"], dtype=torch.float32) for e in examples]
        out["token_weights"] = right_pad(weights, 0.0, out["input_ids"].shape[1])
        return out


class WeightedSFTTrainer(SFTTrainer):
    """SFTTrainer whose token loss is multiplied by `token_weights`."""

    def _set_signature_columns_if_needed(self):
        super()._set_signature_columns_if_needed()
        if "token_weights" not in self._signature_columns:
            self._signature_columns = [*self._signature_columns, "token_weights"]

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        weights = inputs.pop("token_weights")
        outputs = model(**inputs, use_cache=False, fused_lm_head=True)
        # log_probs[:, j] scores the label at position j + 1 (zero where the label is -100).
        per_token = -outputs.log_probs * weights[:, 1:].to(outputs.log_probs.dtype)
        n = outputs.label_mask.sum() if num_items_in_batch is None else num_items_in_batch
        loss = per_token.sum() / torch.as_tensor(n).clamp(min=1)
        if self.args.average_tokens_across_devices and num_items_in_batch is not None:
            loss = loss * self.accelerator.num_processes
        self._log_token_metrics(outputs)
        return (loss, outputs) if return_outputs else loss

    def _log_token_metrics(self, outputs) -> None:
        """Entropy and next-token accuracy on trained tokens (the fused head computes them anyway)."""
        mode = "train" if self.model.training else "eval"
        gather = self.accelerator.gather_for_metrics
        n = gather(outputs.label_mask.sum()).sum()
        if n > 0:
            self._metrics[mode]["entropy"].append((gather(outputs.entropy.detach().sum()).sum() / n).item())
            self._metrics[mode]["mean_token_accuracy"].append((gather(outputs.is_top1.sum()).sum() / n).item())


def build_trainer(
    data_dir: str | Path, base: str | Path, work_dir: Path, out: Path, config: str | Path | dict | None = None
) -> tuple[WeightedSFTTrainer, int]:
    """The trainer, and how many rows were split into turn windows."""
    model, tokenizer = load_base(base, config)
    args = trl_args(SFTConfig, work_dir, load_overrides(config), max_length=4096, remove_unused_columns=False)
    dataset, split = tokenize_dataset(read_dataset(data_dir, "sft"), tokenizer, args.max_length)
    trainer = WeightedSFTTrainer(
        model=model,
        args=args,
        train_dataset=dataset,
        processing_class=tokenizer,
        data_collator=WeightedCollator(pad_token_id=tokenizer.pad_token_id, pad_to_multiple_of=args.pad_to_multiple_of),
        callbacks=[tensorboard(out)],
    )
    return trainer, split


def train_sft(
    data_dir: str | Path,
    base: str | Path,
    out: str | Path,
    round_key: str | None = None,
    config: str | Path | dict | None = None,
) -> CheckpointManifest:
    out = Path(out)
    with tempfile.TemporaryDirectory(prefix="touchstone-sft-") as work:
        trainer, split = build_trainer(data_dir, base, Path(work), out, config)
        result = trainer.train()
        return finish(
            trainer,
            out,
            base=base,
            round_key=round_key,
            datasets=dataset_hashes(data_dir, ["sft"]),
            method="sft",
            metrics={
                "train_loss": result.training_loss,
                "steps": result.global_step,
                "rows": len(trainer.train_dataset),  # training examples: rows, long ones as their windows
                "rows_split": split,
            },
        )
