"""DPO on (accepted, rejected) pairs of the same task with TRL's DPO loss.

Rows are TRL's conversational prompt/chosen/rejected with the run's tools;
the loss covers the model's own (assistant) tokens only, tool observations
masked (training/masked_preference.py).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from datasets import Dataset
from trl import DPOConfig

from touchstone.checkpoint import CheckpointManifest
from training.common import dataset_hashes, finish, load_base, load_overrides, read_dataset, tensorboard, trl_args
from training.masked_preference import MaskedDPOTrainer


def train_dpo(
    data_dir: str | Path,
    base: str | Path,
    out: str | Path,
    round_key: str | None = None,
    config: str | Path | dict | None = None,
) -> CheckpointManifest:
    out = Path(out)
    model, tokenizer = load_base(base, config)
    rows = read_dataset(data_dir, "dpo")
    dataset = Dataset.from_list([{k: r[k] for k in ("prompt", "chosen", "rejected", "tools")} for r in rows])
    with tempfile.TemporaryDirectory(prefix="touchstone-dpo-") as work:
        args = trl_args(DPOConfig, Path(work), load_overrides(config), learning_rate=1e-4, max_length=4096)
        trainer = MaskedDPOTrainer(
            model=model, args=args, train_dataset=dataset, processing_class=tokenizer, callbacks=[tensorboard(out)]
        )
        result = trainer.train()
        return finish(
            trainer,
            out,
            base=base,
            round_key=round_key,
            datasets=dataset_hashes(data_dir, ["dpo"]),
            method="dpo",
            metrics={"train_loss": result.training_loss, "steps": result.global_step, "pairs": len(dataset)},
        )
