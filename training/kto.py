"""KTO on unpaired accepted (desirable) and rejected (undesirable) runs with
TRL's KTO loss; conversational rows, loss on assistant tokens only, as for DPO
(training/masked_preference.py)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from datasets import Dataset
from trl import KTOConfig

from touchstone.checkpoint import CheckpointManifest
from training.common import (
    TrainingError,
    dataset_hashes,
    finish,
    load_base,
    load_overrides,
    read_dataset,
    tensorboard,
    trl_args,
)
from training.masked_preference import MaskedKTOTrainer


def train_kto(
    data_dir: str | Path,
    base: str | Path,
    out: str | Path,
    round_key: str | None = None,
    config: str | Path | dict | None = None,
) -> CheckpointManifest:
    out = Path(out)
    model, tokenizer = load_base(base, config)
    rows = read_dataset(data_dir, "kto")
    if len({r["label"] for r in rows}) < 2:
        raise TrainingError("KTO needs both accepted and rejected runs; this round has only one kind")
    dataset = Dataset.from_list([{k: r[k] for k in ("prompt", "completion", "label", "tools")} for r in rows])
    with tempfile.TemporaryDirectory(prefix="touchstone-kto-") as work:
        args = trl_args(
            KTOConfig,
            Path(work),
            load_overrides(config),
            learning_rate=1e-4,
            max_length=4096,
            per_device_train_batch_size=4,
        )
        trainer = MaskedKTOTrainer(
            model=model, args=args, train_dataset=dataset, processing_class=tokenizer, callbacks=[tensorboard(out)]
        )
        result = trainer.train()
        return finish(
            trainer,
            out,
            base=base,
            round_key=round_key,
            datasets=dataset_hashes(data_dir, ["kto"]),
            method="kto",
            metrics={"train_loss": result.training_loss, "steps": result.global_step, "rows": len(dataset)},
        )
