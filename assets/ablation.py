"""The filter-ablation experiment as assets (docs/EXPERIMENTS.md): the same
code as `touchstone experiment filter-ablation`, one arm and round per
partition (`arm` x `round`), so the UI plots each arm's figures over rounds.

`ablation_setup` (unpartitioned) proposes the task sets and evaluates the base
model; `ablation_round` (partition arm|round, e.g. naive|r001) rolls out the
arm's checkpoint (rounds >= 1), filters with the arm's filter, trains and
evaluates. Round N of an arm needs its round N-1; the hack-prone rollouts of a
round are computed once, by whichever arm runs that round first. State lives
in a local experiment directory, so a rerun resumes."""

from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from orchestration.partitions import ablation_partitions


class AblationRunConfig(dg.Config):
    settings: dict[str, Any] = Field(
        default={},
        description="AblationConfig fields (touchstone/experiments/filter_ablation.py): hack_rate, max_steps, ...",
    )
    directory: str = Field(
        default="", description="Experiment directory (empty: TOUCHSTONE_HOME/experiments/filter-ablation)."
    )

    def resolved(self):
        from touchstone import paths
        from touchstone.experiments.filter_ablation import AblationConfig

        out = Path(self.directory) if self.directory else paths.home() / "experiments" / "filter-ablation"
        return AblationConfig.model_validate(self.settings), out


def _floats(row: dict[str, Any]) -> dict[str, dg.MetadataValue]:
    return {k: dg.MetadataValue.float(float(v)) for k, v in row.items() if isinstance(v, (int, float)) and k != "round"}


@dg.asset(group_name="filter_ablation", kinds={"pytorch"}, pool="sandbox")
def ablation_setup(context: dg.AssetExecutionContext, config: AblationRunConfig) -> dg.MaterializeResult:
    """Training and held-out task sets, and the base model's evaluation (shared by both arms)."""
    from touchstone.experiments.filter_ablation import experiment_tasks
    from training.ablation import base_row

    cfg, out = config.resolved()
    tasks, heldout = experiment_tasks(cfg, out / "tasks")
    row = base_row(cfg, heldout, out)
    return dg.MaterializeResult(
        metadata={
            "directory": dg.MetadataValue.path(str(out)),
            "train_tasks": dg.MetadataValue.int(len(tasks)),
            "heldout_tasks": dg.MetadataValue.int(len(heldout)),
            **_floats(row),
        }
    )


@dg.asset(
    group_name="filter_ablation",
    partitions_def=ablation_partitions,
    deps=[ablation_setup],
    kinds={"pytorch"},
    pool="sandbox",
)
def ablation_round(context: dg.AssetExecutionContext, config: AblationRunConfig) -> dg.MaterializeResult:
    """One arm's round: kept rows, their hack share, hack propensity, imitation NLL, pass@1."""
    from touchstone.experiments.filter_ablation import experiment_tasks
    from touchstone.rounds import round_index
    from training.ablation import run_arm_round

    cfg, out = config.resolved()
    keys = context.partition_key.keys_by_dimension
    tasks, heldout = experiment_tasks(cfg, out / "tasks")
    try:
        row = run_arm_round(cfg, keys["arm"], round_index(keys["round"]), tasks, heldout, out)
    except ValueError as exc:
        raise dg.Failure(str(exc)) from exc
    return dg.MaterializeResult(
        metadata={
            "directory": dg.MetadataValue.path(str(out / keys["arm"] / keys["round"])),
            **_floats(row.model_dump()),
        }
    )
