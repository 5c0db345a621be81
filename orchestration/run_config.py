"""Run configs: YAML in the launchpad's format (`ops:` and `resources:`) for
`touchstone round run -c`, the nightly schedule and the continuous sensor.
Several files make one config, later ones over earlier ones (`-c recipe.yaml -c
overlay.yaml`; `merge_run_configs`): a recipe and where it runs stay apart.

The schedule and the sensor read the files named by `TOUCHSTONE_RUN_CONFIG`
(one path, or several joined by the path separator, `:`) at every tick (so a
change needs no redeploy); unset, rounds run on the defaults. Shipped examples:
`orchestration/deploy/local-served.yaml` (a laptop, the checkpoint behind
`transformers serve`), `orchestration/deploy/cluster.yaml`, and the overlay
`orchestration/deploy/gpu-vllm.yaml` (over `local-smollm2.yaml`).
A config is checked against the assets by `orchestration.definitions.validate_run_config`.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

ENV_VAR = "TOUCHSTONE_RUN_CONFIG"
SECTIONS = {"ops", "resources", "execution", "loggers"}


class RunConfigError(ValueError):
    """The run config file is missing, not YAML, or has a section Dagster does not know."""


def load_run_config(path: str | os.PathLike) -> dict:
    """The parsed run config; its sections are checked here, the fields by Dagster at launch."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise RunConfigError(f"run config {path}: {exc}") from exc
    if not isinstance(data, dict):
        raise RunConfigError(f"run config {path}: expected a mapping with {', '.join(sorted(SECTIONS))}")
    unknown = sorted(set(data) - SECTIONS)
    if unknown:
        raise RunConfigError(
            f"run config {path}: unknown section(s) {', '.join(unknown)}; expected {', '.join(sorted(SECTIONS))}"
        )
    return data


def load_run_configs(paths: list[str | os.PathLike]) -> dict:
    """The files' run configs merged in order (`merge_run_configs`); none: {} (the defaults)."""
    merged: dict = {}
    for path in paths:
        merged = merge_run_configs(merged, load_run_config(path))
    return merged


def merge_run_configs(base: dict, over: dict) -> dict:
    """`over` on top of `base`: mappings merge key by key, at every depth; anything else in `over`
    (a value, a list, an `{env: NAME}` over a plain value) replaces what `base` has there."""
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_run_configs(merged[key], value)
        else:
            merged[key] = value
    return merged


def with_seed(run_config: dict, seed: int) -> dict:
    """The run config with one study seed for all the run's randomness: the policy's sampling
    (attempt i samples with seed + i, so a study's seeds lie further apart than its attempts)
    and the trainer's (TRL `seed`: data order, dropout). Task sets stay as configured, so the
    seeds of a study are compared on the same training and held-out tasks."""
    seeded = {"policy": {"config": {"seed": seed}}, "trainer": {"config": {"config": {"seed": seed}}}}
    return merge_run_configs(run_config, {"resources": seeded})


def env_run_config() -> dict:
    """The run config of the files TOUCHSTONE_RUN_CONFIG names (`os.pathsep` between several,
    merged in order), or {} (the defaults)."""
    return load_run_configs([p for p in os.environ.get(ENV_VAR, "").split(os.pathsep) if p])


def configured_store(run_config: dict):
    """The RoundStore a run with this config writes: the storage resource's config
    (`{env: NAME}` values read from the environment, as Dagster does), else the default root."""
    from orchestration.resources import StorageResource

    config = run_config.get("resources", {}).get("storage", {}).get("config", {})
    values = {k: os.environ.get(v["env"], "") if isinstance(v, dict) and "env" in v else v for k, v in config.items()}
    return StorageResource(**values).store()
