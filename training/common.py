"""What every trainer shares: loading the base checkpoint, TRL config defaults
(+ the user's YAML overrides), TensorBoard logs, and writing the checkpoint."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import torch
import yaml
from transformers import AutoModelForCausalLM, AutoTokenizer

from touchstone.data.schema import DPORow, KTORow, RLRow, SFTRow
from touchstone.data.schema import read_rows
from training.model_options import (
    MODEL_KEYS,
    ModelOptionError,
    apply_peft,
    load_kwargs,
    resolve_base,
    split_options,
)
from touchstone.checkpoint import CheckpointManifest, content_hash, read_manifest, write_manifest
from training.progress import ProgressCallback

LOG_DIR = "logs"  # TensorBoard event files, inside the checkpoint, outside its content hash


ROW_MODELS = {"sft": SFTRow, "rl": RLRow, "dpo": DPORow, "kto": KTORow}


class TrainingError(ValueError):
    """Training cannot start: missing data, empty dataset, bad base checkpoint or config."""


def load_base(base: str | Path, config: str | Path | dict | None = None):
    """Model and tokenizer, with the config's model options (training.model_options:
    dtype float32 by default, attention kernel, LoRA)."""
    _, options = split_options(load_overrides(config))
    try:
        base = resolve_base(base)
        kwargs = load_kwargs(options)
    except ModelOptionError as exc:
        raise TrainingError(str(exc)) from exc
    if not (base / "config.json").is_file():
        raise TrainingError(f"{base}: not a Hugging Face checkpoint directory (no config.json)")
    tokenizer = AutoTokenizer.from_pretrained(base)
    model = AutoModelForCausalLM.from_pretrained(base, **kwargs)
    try:
        return apply_peft(model, options.get("peft")), tokenizer
    except (ModelOptionError, ValueError) as exc:
        raise TrainingError(f"peft: {exc}") from exc


def read_dataset(data_dir: str | Path, name: str) -> list[dict[str, Any]]:
    """The rows of the named dataset (`sft`, `rl`, ...) of a training-data directory; none is an error."""
    path = Path(data_dir) / f"{name}.parquet"
    if not path.is_file():
        raise TrainingError(f"{path}: not found; build it with `touchstone data build`")
    rows = read_rows(path, ROW_MODELS[name])
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
        include_num_input_tokens_seen=True,  # tokens/s in the progress reports (training.progress)
    )
    merged = {**base, **defaults, **split_options(overrides)[0]}
    check_fields(config_cls, merged)
    try:
        return config_cls(**merged)
    except TypeError as exc:
        raise TrainingError(f"{config_cls.__name__}: {exc}") from exc


def right_pad(rows: list[torch.Tensor], value: float, width: int | None = None) -> torch.Tensor:
    """Stack 1-D tensors right-padded with `value` (to `width` when given: the
    width a TRL collator chose for the batch's ids)."""
    out = torch.nn.utils.rnn.pad_sequence(rows, batch_first=True, padding_value=value)
    return out if width is None else torch.nn.functional.pad(out, (0, width - out.shape[1]), value=value)


def check_fields(config_cls, fields: dict[str, Any]) -> None:
    """Reject keys the TRL config does not have, naming them (a typo must not be silently ignored)."""
    known = {f.name for f in dataclasses.fields(config_cls)} | set(MODEL_KEYS)
    unknown = sorted(set(fields) - known)
    if unknown:
        raise TrainingError(f"{config_cls.__name__} has no field(s) {', '.join(map(repr, unknown))}")


def tensorboard(out: Path) -> ProgressCallback:
    """TensorBoard logs in the checkpoint, and progress to the launcher (training.progress)."""
    return ProgressCallback(out / LOG_DIR)


def dataset_hashes(data_dir: str | Path, names: list[str]) -> dict[str, str]:
    return {name: content_hash(Path(data_dir) / f"{name}.parquet") for name in names}


def _scalars(fields: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if isinstance(v, (int, float, str, bool, type(None)))}


def finish(
    trainer,
    out: Path,
    *,
    base: str | Path,
    round_key: str | None,
    datasets: dict[str, str],
    method: str,
    metrics: dict[str, float],
) -> CheckpointManifest:
    """Save weights + tokenizer into `out`, then the manifest (main process
    only; under `accelerate launch` every rank returns the same manifest)."""
    model = trainer.accelerator.unwrap_model(trainer.model)
    lora = getattr(model, "peft_config", {}).get("default")
    if lora is not None:  # LoRA: merged in, so the checkpoint is full weights as always
        if trainer.accelerator.is_main_process:
            model.merge_and_unload().save_pretrained(str(out))
    else:
        trainer.save_model(str(out))
    if trainer.accelerator.is_main_process:
        trainer.processing_class.save_pretrained(str(out))
        args = _scalars(trainer.args.to_dict())
        for local in ("output_dir", "logging_dir"):  # temp paths: not part of the recipe
            args.pop(local, None)
        recipe = {
            "method": method,
            "trainer": args,
            "processes": trainer.accelerator.num_processes,
            "model_dtype": str(model.dtype).removeprefix("torch."),
        }
        if lora is not None:
            recipe["peft"] = _scalars(lora.to_dict()) | {"target_modules": sorted(lora.target_modules or [])}
        write_manifest(
            out,
            round_key=round_key,
            parent=base,
            datasets=datasets,
            config=recipe,
            metrics={k: float(v) for k, v in metrics.items() if isinstance(v, (int, float))},
        )
    trainer.accelerator.wait_for_everyone()
    return read_manifest(out)


def experiment_train_config(cfg: Any, seed: int) -> dict[str, Any]:
    """The trainer overrides an experiment's arm trains with: the experiment config's
    `max_steps`, `learning_rate`, `max_length`, `batch_size` and `peft`, no progress bars, `seed`."""
    return {
        **({"peft": cfg.peft} if cfg.peft else {}),
        "max_steps": cfg.max_steps,
        "learning_rate": cfg.learning_rate,
        "max_length": cfg.max_length,
        "per_device_train_batch_size": cfg.batch_size,
        "disable_tqdm": True,
        "seed": seed,
    }
