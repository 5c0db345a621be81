"""The credit-assignment study as assets (docs/EXPERIMENTS.md): the same code as
`touchstone experiment credit`. `credit_study_data` (unpartitioned) proposes the
task sets and verifies the shared hack-prone runs with progress points;
`credit_study_arm` (one partition per arm) trains and measures every seed of
its arm, with each metric's interval over seeds as metadata. State lives in a
local study directory, so a rerun resumes."""

from pathlib import Path
from typing import Any

import dagster as dg
from pydantic import Field

from touchstone.experiments.credit_study import CREDIT_ARMS

credit_arm_partitions = dg.StaticPartitionsDefinition(list(CREDIT_ARMS))


class CreditRunConfig(dg.Config):
    settings: dict[str, Any] = Field(default={}, description="CreditStudyConfig fields: seeds, max_steps, ...")
    directory: str = Field(default="", description="Study directory (empty: TOUCHSTONE_HOME/experiments/credit).")
    tasks: str = Field(default="", description="Training task set (empty: proposed from the shipped seeds).")
    heldout: str = Field(default="", description="Held-out task set (with tasks).")
    base: str = Field(default="", description="Base checkpoint directory (empty: the tiny default model).")

    def inputs(self):
        """(config, directory, training tasks, held-out tasks, base checkpoint)."""
        from touchstone import paths
        from touchstone.experiments.credit_study import CreditStudyConfig
        from touchstone.experiments.filter_ablation import AblationConfig, experiment_tasks
        from touchstone.tasks.schema import load_task_set
        from training.model_init import default_model

        cfg = CreditStudyConfig.model_validate(self.settings)
        out = Path(self.directory) if self.directory else paths.home() / "experiments" / "credit"
        if bool(self.tasks) != bool(self.heldout):
            raise dg.Failure("credit study config: `tasks` and `heldout` go together")
        if self.tasks:
            tasks, heldout = load_task_set(Path(self.tasks)), load_task_set(Path(self.heldout))
        else:
            sizes = AblationConfig(n_tasks=cfg.n_tasks, n_heldout=cfg.n_heldout, seed=cfg.seed, backend=cfg.backend)
            tasks, heldout = experiment_tasks(sizes, out / "tasks")
        base = Path(self.base) if self.base else default_model(seed=cfg.seed)
        return cfg, out, tasks, heldout, base


@dg.asset(group_name="credit_study", kinds={"pytorch"}, pool="sandbox")
def credit_study_data(context: dg.AssetExecutionContext, config: CreditRunConfig) -> dg.MaterializeResult:
    """The verified runs every arm trains on (with progress points) and the held-out reference runs."""
    from training.credit_study import study_inputs

    cfg, out, tasks, heldout, _ = config.inputs()
    _, _, data = study_inputs(cfg, tasks, heldout, out)
    return dg.MaterializeResult(
        metadata={
            "directory": dg.MetadataValue.path(str(out)),
            "runs": dg.MetadataValue.int(data["runs"]),
            "with_progress": dg.MetadataValue.int(data["with_progress"]),
            "reference_runs": dg.MetadataValue.int(data["reference_runs"]),
            "verdicts": dg.MetadataValue.json(data["verdicts"]),
        }
    )


@dg.asset(
    group_name="credit_study",
    partitions_def=credit_arm_partitions,
    deps=[credit_study_data],
    kinds={"pytorch"},
    pool="sandbox",
)
def credit_study_arm(context: dg.AssetExecutionContext, config: CreditRunConfig) -> dg.MaterializeResult:
    """Every seed of one arm: each metric's mean over seeds and its 95% bootstrap interval over seeds."""
    from training.credit_study import run_arm, study_inputs

    cfg, out, tasks, heldout, base = config.inputs()
    examples, reference, _ = study_inputs(cfg, tasks, heldout, out)
    result = run_arm(cfg, context.partition_key, examples, heldout, reference, base, out, context.log.info)
    metadata: dict[str, dg.MetadataValue] = {"directory": dg.MetadataValue.path(str(out / context.partition_key))}
    for name, s in result["summary"].items():
        if s is not None:
            metadata |= {f"{name}{suffix}": dg.MetadataValue.float(s[key]) for key, suffix in
                         (("value", ""), ("low", "_low"), ("high", "_high"))}  # fmt: skip
    metadata["seeds"] = dg.MetadataValue.json(result["rows"])
    return dg.MaterializeResult(metadata=metadata)
