"""The Dagster code location: `dagster dev -w workspace.yaml` or
`dagster asset materialize -m orchestration.definitions --select ... --partition r000`."""

from __future__ import annotations

import dagster as dg

from assets import (
    ablation,
    checkpoint,
    control,
    credit_study,
    evaluation,
    sources,
    tasks,
    trajectories,
    training_data,
    verification,
)
from orchestration.checks import round_checks
from orchestration.executors import executor_from_env
from orchestration.jobs import control_job, credit_study_job, filter_ablation_job, round_job, sources_job
from orchestration.resources import default_resources
from orchestration.run_config import RunConfigError
from orchestration.schedules import nightly_round
from orchestration.sensors import continuous_rounds

ASSET_MODULES = [
    sources,
    tasks,
    trajectories,
    verification,
    training_data,
    checkpoint,
    evaluation,
    control,
    ablation,
    credit_study,
]

ASSETS = dg.load_assets_from_modules(ASSET_MODULES)

defs = dg.Definitions(
    assets=ASSETS,
    asset_checks=round_checks,
    jobs=[sources_job, round_job, control_job, filter_ablation_job, credit_study_job],
    schedules=[nightly_round],
    sensors=[continuous_rounds],
    resources=default_resources(),
    executor=executor_from_env(ASSETS),
)


def validate_run_config(run_config: dict) -> None:
    """Check every field against all assets and resources now (Dagster's own
    validation: unknown keys and closed choices named), not after the sources ran."""
    try:
        dg.validate_run_config(defs.resolve_implicit_global_asset_job_def(), run_config)
    except dg.DagsterInvalidConfigError as exc:
        raise RunConfigError(str(exc)) from exc
