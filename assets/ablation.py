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
from touchstone.paths import Asset


class AblationRunConfig(dg.Config):
    settings: dict[str, Any] = Field(
        default={},
        description="AblationConfig fields (touchstone/experiments/filter_ablation.py): hack_rate, max_steps, ...",
    )
    directory: str = Field(
        default="", description="Experiment directory (empty: TOUCHSTONE_HOME/experiments/filter-ablation)."
    )
    tasks: str = Field(default="", description="Training task set (empty: proposed from the shipped seeds).")
    heldout: str = Field(default="", description="Held-out task set (with tasks).")
    base: str = Field(
        default="", description="Base checkpoint directory every arm starts from (empty: the tiny default)."
    )

    def base_model(self, cfg) -> Path:
        from training.model_init import default_model

        return Path(self.base) if self.base else default_model(seed=cfg.seed)

    def resolved(self):
        from touchstone import paths
        from touchstone.experiments.filter_ablation import AblationConfig

        out = Path(self.directory) if self.directory else paths.home() / "experiments" / "filter-ablation"
        return AblationConfig.model_validate(self.settings), out

    def task_sets(self, cfg, out: Path):
        """(training, held-out) tasks: the given sets, else proposed once into OUT/tasks."""
        from touchstone.experiments.filter_ablation import experiment_tasks
        from touchstone.tasks.schema import load_task_set

        if bool(self.tasks) != bool(self.heldout):
            raise dg.Failure("ablation config: `tasks` and `heldout` go together")
        if self.tasks:
            return load_task_set(Path(self.tasks)), load_task_set(Path(self.heldout))
        return experiment_tasks(cfg, out / "tasks")


def _floats(row: dict[str, Any]) -> dict[str, dg.MetadataValue]:
    return {k: dg.MetadataValue.float(float(v)) for k, v in row.items() if isinstance(v, (int, float)) and k != "round"}


@dg.asset(group_name="filter_ablation", kinds={"pytorch"}, pool="sandbox")
def ablation_setup(context: dg.AssetExecutionContext, config: AblationRunConfig) -> dg.MaterializeResult:
    """Training and held-out task sets, and the base model's evaluation (shared by both arms)."""
    from training.ablation import base_row

    cfg, out = config.resolved()
    tasks, heldout = config.task_sets(cfg, out)
    row = base_row(cfg, heldout, out, config.base_model(cfg))
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
    from touchstone.rounds import round_index
    from training.ablation import run_arm_round

    cfg, out = config.resolved()
    keys = context.partition_key.keys_by_dimension
    arm, index = keys["arm"], round_index(keys["round"])
    base = config.base_model(cfg)
    lineage = _parent_lineage(context.instance, out, arm, keys["round"], base)
    tasks, heldout = config.task_sets(cfg, out)
    try:
        row = run_arm_round(cfg, arm, index, tasks, heldout, out, base)
    except ValueError as exc:
        raise dg.Failure(str(exc)) from exc
    return dg.MaterializeResult(
        metadata={
            "directory": dg.MetadataValue.path(str(out / arm / keys["round"])),
            "checkpoint_hash": dg.MetadataValue.text(row.checkpoint_hash),
            **lineage,
            **_floats(row.model_dump()),
        }
    )


def _parent_lineage(
    instance: dg.DagsterInstance, out: Path, arm: str, round_key: str, base: Path
) -> dict[str, dg.MetadataValue]:
    """Round N of an arm starts from the weights its round N-1 ended with. Dynamic
    partitions cannot declare that dependency (dagster-io/dagster#15079), so it is
    looked up in the instance's records: fail unless arm|N-1 was materialized and
    the weights on disk are the ones that materialization recorded."""
    from orchestration.lineage import latest_metadata
    from touchstone.checkpoint import checkpoint_hash
    from touchstone.rounds import previous_round, round_index
    from training.ablation import arm_start

    prev = previous_round(round_key)
    if prev is None:
        return {"parent_partition": dg.MetadataValue.text("base")}
    parent = dg.MultiPartitionKey({"arm": arm, "round": prev})
    found = latest_metadata(instance, dg.AssetKey(Asset.ABLATION_ROUND), parent)
    if found is None:
        raise dg.Failure(
            f"{arm}|{round_key} starts from {parent}, which has not been materialized: materialize it first"
        )
    metadata, run_id = found
    try:
        start = arm_start(out, arm, round_index(round_key), base)
    except ValueError as exc:
        raise dg.Failure(str(exc)) from exc
    if checkpoint_hash(start) != metadata.get("checkpoint_hash"):
        raise dg.Failure(
            f"{arm}|{round_key}: the weights in {out} ({start}) are not the ones {parent} recorded "
            f"(run {run_id}): was it materialized with another directory?"
        )
    return {
        "parent_partition": dg.MetadataValue.text(str(parent)),
        "parent_run": dg.MetadataValue.dagster_run(run_id),
        "start_checkpoint_hash": dg.MetadataValue.text(checkpoint_hash(start)),
    }
