"""Run configs: one YAML (the launchpad's format: `ops:` and `resources:`)
for `touchstone round run -c`, the nightly schedule and the continuous sensor.

The schedule and the sensor read the file named by `TOUCHSTONE_RUN_CONFIG`
at every tick (so a change needs no redeploy); unset, rounds run on the
defaults. Shipped examples: `orchestration/deploy/local-served.yaml` (a laptop,
the checkpoint behind `transformers serve`) and `orchestration/deploy/cluster.yaml`.
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


def with_seed(run_config: dict, seed: int) -> dict:
    """The run config with one study seed for all the run's randomness: the policy's sampling
    (attempt i samples with seed + i, so a study's seeds lie further apart than its attempts)
    and the trainer's (TRL `seed`: data order, dropout). Task sets stay as configured, so the
    seeds of a study are compared on the same training and held-out tasks."""
    resources = dict(run_config.get("resources") or {})
    policy = dict(resources.get("policy") or {})
    policy["config"] = {**(policy.get("config") or {}), "seed": seed}
    trainer = dict(resources.get("trainer") or {})
    trainer_config = dict(trainer.get("config") or {})
    trainer_config["config"] = {**(trainer_config.get("config") or {}), "seed": seed}
    trainer["config"] = trainer_config
    return {**run_config, "resources": {**resources, "policy": policy, "trainer": trainer}}


def env_run_config() -> dict:
    """The run config named by TOUCHSTONE_RUN_CONFIG, or {} (the defaults)."""
    path = os.environ.get(ENV_VAR)
    return load_run_config(path) if path else {}


def configured_store(run_config: dict):
    """The RoundStore a run with this config writes: the storage resource's config
    (`{env: NAME}` values read from the environment, as Dagster does), else the default root."""
    from orchestration.resources import StorageResource

    config = run_config.get("resources", {}).get("storage", {}).get("config", {})
    values = {k: os.environ.get(v["env"], "") if isinstance(v, dict) and "env" in v else v for k, v in config.items()}
    return StorageResource(**values).store()
