"""One entry point for every training method, in-process or under
`accelerate launch` (multi-GPU / DeepSpeed / FSDP, configs in
training/configs/accelerate/)."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from touchstone.checkpoint import CheckpointManifest, read_manifest
from training.common import TrainingError, check_fields, load_overrides
from training.model_options import ModelOptionError, resolve_base

METHODS = ("sft", "rl", "dpo", "kto")


# method -> (module, attribute) of its trainer function and of its TRL config class;
# imported on use, so `touchstone train sft` does not import the RL code.
_TRAINERS = {
    "sft": ("training.sft", "train_sft"),
    "rl": ("training.rl", "train_rl"),
    "dpo": ("training.dpo", "train_dpo"),
    "kto": ("training.kto", "train_kto"),
}
_CONFIGS = {
    "sft": ("trl", "SFTConfig"),
    "rl": ("training.rl", "PGConfig"),
    "dpo": ("trl", "DPOConfig"),
    "kto": ("trl", "KTOConfig"),
}


def _lookup(table: dict[str, tuple[str, str]], method: str):
    if method not in table:
        raise TrainingError(f"unknown training method {method!r}; expected one of {', '.join(METHODS)}")
    module, name = table[method]
    return getattr(importlib.import_module(module), name)


def _trainer(method: str):
    return _lookup(_TRAINERS, method)


def train(
    method: str,
    *,
    data_dir: str | Path,
    base: str | Path,
    out: str | Path,
    round_key: str | None = None,
    config: str | Path | dict | None = None,
    max_steps: int | None = None,
    learning_rate: float | None = None,
    accelerate_config: str | Path | None = None,
) -> CheckpointManifest:
    """Train checkpoint `out` from `base` on `data_dir/<method>.parquet`.
    `config` holds TRL config fields (YAML file or dict); max_steps and
    learning_rate, when given, override it."""
    overrides: dict[str, Any] = load_overrides(config)
    if max_steps is not None:
        overrides["max_steps"] = max_steps
    if learning_rate is not None:
        overrides["learning_rate"] = learning_rate
    fn = _trainer(method)
    try:
        base = resolve_base(base)
    except ModelOptionError as exc:
        raise TrainingError(str(exc)) from exc
    if accelerate_config is None:
        return fn(data_dir, base, out, round_key=round_key, config=overrides)
    cmd = [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--config_file",
        str(accelerate_config),
        "-m",
        "training.train",
        method,
        str(data_dir),
        str(base),
        str(out),
        round_key or "",
        json.dumps(overrides),
    ]
    subprocess.run(cmd, check=True)
    return read_manifest(out)


def config_class(method: str):
    """The TRL config class a method's trainer builds from the config fields."""
    return _lookup(_CONFIGS, method)


def check_config(method: str, config: dict[str, Any]) -> None:
    """Fail before launching anything when the config names a field the method's TRL config lacks."""
    check_fields(config_class(method), config)


def _main(argv: list[str]) -> None:
    """Worker side of `accelerate launch` (positional args, see `train`)."""
    method, data_dir, base, out, round_key, overrides = argv
    _trainer(method)(data_dir, base, out, round_key=round_key or None, config=json.loads(overrides))


if __name__ == "__main__":
    _main(sys.argv[1:])
