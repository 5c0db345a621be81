"""SFT training throughput: TRL's SFTTrainer (our weighted subclass, as used
for every round) against a bare PyTorch loop on the same model, the same
batches and the same weighted loss, in the same run.

    python -m benchmarks.bench_training [--rows 48] [--batch 8] [--steps 12]

Tokens/s counts the non-padding tokens of the batches processed. Both loops
run the same number of optimizer steps; the trainer's time covers
`trainer.train()` (its dataloader, logging, scheduler included)."""

from __future__ import annotations

import argparse
import json
import sysconfig
import tempfile
import time
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer
from trl import SFTConfig

from touchstone.episode.tools import TOOL_SCHEMAS
from training.common import load_base, trl_args
from training.model_init import init_model
from training.sft import WeightedCollator, WeightedSFTTrainer, tokenize_row, training_template


def synthetic_rows(n: int) -> list[dict]:
    """Chats whose assistant turns write real Python (stdlib chunks) with tool calls."""
    sources = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    rows = []
    for i in range(n):
        code = sources[i % len(sources)].read_text(errors="replace")[:1200]
        messages = [
            {"role": "system", "content": "You are a coding agent."},
            {"role": "user", "content": f"Fix the bug in module {i}."},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [
                    {
                        "type": "function",
                        "function": {"name": "write_file", "arguments": {"path": "m.py", "content": code}},
                    }
                ],
            },
            {"role": "tool", "content": f"wrote {len(code)} characters to m.py"},
            {
                "role": "assistant",
                "content": "",
                "tool_calls": [{"type": "function", "function": {"name": "submit", "arguments": {}}}],
            },
        ]
        rows.append(
            {"trajectory_id": f"b{i}", "messages": messages, "tools": TOOL_SCHEMAS[:1], "turn_weights": [1.5, 0.5]}
        )
    return rows


def weighted_loss(model, batch) -> torch.Tensor:
    """The same loss as WeightedSFTTrainer, from full logits."""
    logits = model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).logits[:, :-1]
    labels = batch["labels"][:, 1:]
    ce = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.size(-1)), labels.reshape(-1), ignore_index=-100, reduction="none"
    ).view_as(labels)
    return (ce * batch["token_weights"][:, 1:]).sum() / (labels != -100).sum().clamp(min=1)


def bare_loop(base: Path, batches: list[list[dict]], collate, lr: float) -> float:
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    model.train()
    started = time.perf_counter()
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    for examples in batches:  # collating is part of the loop, as in the Trainer's dataloader
        weighted_loss(model, collate(examples)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)  # as the Trainer does (max_grad_norm=1)
        opt.step()
        opt.zero_grad()
    return time.perf_counter() - started


def trainer_loop(base: Path, examples: list[dict], batch_size: int, steps: int, lr: float) -> float:
    from datasets import Dataset

    model, tokenizer = load_base(base)
    with tempfile.TemporaryDirectory() as work:
        # The defaults every round trains with, minus the progress bar.
        args = trl_args(
            SFTConfig,
            Path(work),
            {},
            max_steps=steps,
            per_device_train_batch_size=batch_size,
            learning_rate=lr,
            logging_steps=steps,
            remove_unused_columns=False,
            max_length=None,
            disable_tqdm=True,
        )
        trainer = WeightedSFTTrainer(
            model=model,
            args=args,
            train_dataset=Dataset.from_list(examples),
            processing_class=tokenizer,
            data_collator=WeightedCollator(pad_token_id=tokenizer.pad_token_id),
        )
        started = time.perf_counter()
        trainer.train()
        return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=48)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--steps", type=int, default=12)
    a = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = init_model(Path(tmp) / "base")
        tok = AutoTokenizer.from_pretrained(base)
        template = training_template(tok)
        examples = [tokenize_row(r, tok, template) for r in synthetic_rows(a.rows)]
        collate = WeightedCollator(pad_token_id=tok.pad_token_id)
        # The trainer's sampler shuffles with seed 0; the bare loop takes the batches in order: same tokens per batch size.
        order = [examples[(i * a.batch + j) % len(examples)] for i in range(a.steps) for j in range(a.batch)]
        batches = [order[i * a.batch : (i + 1) * a.batch] for i in range(a.steps)]
        tokens = sum(len(e["input_ids"]) for e in order)
        results = []
        for name, fn in [
            ("bare PyTorch loop", lambda: bare_loop(base, batches, collate, 1e-3)),
            ("TRL SFTTrainer (weighted)", lambda: trainer_loop(base, examples, a.batch, a.steps, 1e-3)),
        ]:
            wall = fn()
            results.append(
                {
                    "loop": name,
                    "steps": a.steps,
                    "batch": a.batch,
                    "tokens": tokens,
                    "wall_s": round(wall, 2),
                    "tokens_per_s": round(tokens / wall, 1),
                }
            )
    ratio = results[1]["tokens_per_s"] / results[0]["tokens_per_s"]
    print(
        json.dumps(
            {
                "bench": "training",
                "results": results,
                "notes": [
                    f"SFTTrainer / bare loop tokens-per-second ratio: {ratio:.2f} (target ≥ 0.8)",
                    "Same tiny default model (Qwen2, ~0.9 M parameters), same chats (stdlib code in write_file calls), "
                    "same weighted assistant-only loss, float32 on CPU.",
                ],
            }
        )
    )


if __name__ == "__main__":
    main()
