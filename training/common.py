"""What every trainer shares: loading the base checkpoint, TRL config defaults
(+ the user's YAML overrides), TensorBoard logs, and writing the checkpoint."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
import yaml
from torch.utils.tensorboard import SummaryWriter
from transformers import AutoModelForCausalLM, AutoTokenizer
from transformers.integrations import TensorBoardCallback

from touchstone.data.schema import DPORow, KTORow, RLRow, SFTRow
from touchstone.data.schema import read_rows as dataset_rows
from touchstone.checkpoint import CheckpointManifest, content_hash, read_manifest, write_manifest

LOG_DIR = "logs"  # TensorBoard event files, inside the checkpoint, outside its content hash


ROW_MODELS = {"sft": SFTRow, "rl": RLRow, "dpo": DPORow, "kto": KTORow}


class TrainingError(ValueError):
    """Training cannot start: missing data, empty dataset, bad base checkpoint or config."""


def load_base(base: str | Path):
    """Model (float32: CPU-safe; GPU users get bf16 autocast via the config) and tokenizer."""
    base = Path(base)
    if not (base / "config.json").is_file():
        raise TrainingError(f"{base}: not a Hugging Face checkpoint directory (no config.json)")
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, dtype=torch.float32)
    return model, tokenizer


def read_rows(data_dir: str | Path, name: str) -> list[dict[str, Any]]:
    path = Path(data_dir) / f"{name}.parquet"
    if not path.is_file():
        raise TrainingError(f"{path}: not found; build it with `touchstone data build`")
    rows = dataset_rows(path, ROW_MODELS[name])
    if not rows:
        raise TrainingError(f"{path}: no rows — nothing verified to train on this round")
    return rows


def load_overrides(config: str | Path | dict | None) -> dict[str, Any]:
    """User overrides of TRL config fields, from a YAML file or a dict."""
    if config is None:
        return {}
    if isinstance(config, dict):
        return dict(config)
    data = yaml.safe_load(Path(config).read_text()) or {}
    if not isinstance(data, dict):
        raise TrainingError(f"{config}: expected a mapping of config fields")
    return data


def trl_args(config_cls, work_dir: Path, overrides: dict[str, Any], **defaults: Any):
    """A TRL config with laptop-friendly defaults; the user's fields win."""
    cuda = torch.cuda.is_available()
    base = dict(
        output_dir=str(work_dir),
        max_steps=10,
        per_device_train_batch_size=2,
        learning_rate=5e-4,
        logging_steps=1,
        save_strategy="no",
        report_to="none",  # TensorBoard is attached explicitly, to write into the checkpoint
        bf16=cuda and torch.cuda.is_bf16_supported(),
        use_cpu=not cuda,
        seed=0,
        dataloader_num_workers=0,
        disable_tqdm=False,  # the progress bar
        # TRL turns recomputation on by default; for the tiny default model it only costs
        # time. Large models: set `activation_checkpointing: true` in the config.
        activation_checkpointing=False,
    )
    merged = {**base, **defaults, **overrides}
    try:
        return config_cls(**merged)
    except TypeError as exc:
        raise TrainingError(f"{config_cls.__name__}: {exc}") from exc


def tensorboard(out: Path) -> TensorBoardCallback:
    return TensorBoardCallback(tb_writer=SummaryWriter(log_dir=str(out / LOG_DIR)))


def dataset_hashes(data_dir: str | Path, names: list[str]) -> dict[str, str]:
    return {name: content_hash(Path(data_dir) / f"{name}.parquet") for name in names}


def finish(trainer, out: Path, *, base: str | Path, round_key: str | None, datasets: dict[str, str],
           method: str, metrics: dict[str, float]) -> CheckpointManifest:
    """Save weights + tokenizer into `out`, then the manifest (main process
    only; under `accelerate launch` every rank returns the same manifest)."""
    trainer.save_model(str(out))
    if trainer.accelerator.is_main_process:
        trainer.processing_class.save_pretrained(str(out))
        args = {k: v for k, v in trainer.args.to_dict().items() if isinstance(v, (int, float, str, bool, type(None)))}
        for local in ("output_dir", "logging_dir"):  # temp paths: not part of the recipe
            args.pop(local, None)
        write_manifest(
            out, round_key=round_key, parent=base, datasets=datasets,
            config={"method": method, "trainer": args},
            metrics={k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))},
        )
    trainer.accelerator.wait_for_everyone()
    return read_manifest(out)
