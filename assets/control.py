"""control_evaluation: expert iteration's control arm for a round. The base model trained
for as many optimizer steps as the round's checkpoint has had in all (its lineage back to
the base), on round 0's verified data alone (the first round on that lineage that trained),
then evaluated on the same held-out tasks as round_evaluation, with its k. Against the
round's own evaluation it says whether the later rounds' fresh runs, not just more steps on
the first round's rows, made the model better (touchstone.evaluate.control). Not part of the
round job: `touchstone round run --control` (`--rounds 0 --control` for an existing round), or
`dagster asset materialize --select control_evaluation --partition rNNN`."""

import shutil
from pathlib import Path

import dagster as dg
import polars as pl

from orchestration.heldout import heldout_metrics
from orchestration.lineage import BASE_ROUND, latest_metadata
from orchestration.partitions import rounds_partitions
from orchestration.pipes_training import train_on_round_data
from orchestration.policy_server import PolicyServerResource
from orchestration.publishing import publishing
from orchestration.resources import (
    EvalConfig,
    PolicyResource,
    SandboxResource,
    StorageResource,
    TrainerResource,
    VerifierResource,
)
from orchestration.storage import read_parquet
from touchstone.paths import Asset


@dg.asset(
    partitions_def=rounds_partitions,
    group_name="controls",
    deps=[Asset.ROUND_EVALUATION, Asset.BASE_MODEL, Asset.HELDOUT_TASKS],
    kinds={"pytorch"},
    pool="sandbox",
)
def control_evaluation(
    context: dg.AssetExecutionContext,
    storage: StorageResource,
    sandbox: SandboxResource,
    policy: PolicyResource,
    verifier: VerifierResource,
    trainer: TrainerResource,
    server: PolicyServerResource,
    pipes: dg.PipesSubprocessClient,
) -> dg.MaterializeResult:
    """The control checkpoint's held-out metrics (metrics.parquet), its weights (model/), and
    comparison.md / comparison.json: the round's pass@1 and pass@k against the control's."""
    from touchstone.evaluate.control import compare_to_control
    from touchstone.evaluate.schema import RoundMetrics

    store = storage.store()
    round_key = context.partition_key
    loop_file = store.asset_dir(Asset.ROUND_EVALUATION, round_key) / "metrics.parquet"
    if not loop_file.exists():
        raise dg.Failure(f"round {round_key} has no evaluation to compare with: materialize round_evaluation first")
    loop = RoundMetrics.from_flat(read_parquet(loop_file).row(0, named=True))
    steps, data_round = lineage_steps(context.instance, round_key)
    base = latest_metadata(context.instance, dg.AssetKey(Asset.BASE_MODEL))
    if base is None:
        raise dg.Failure("base_model has not been materialized")
    work = store.work_dir(Asset.CONTROL_EVALUATION, round_key)
    model = _train_control(
        context, store, trainer, pipes, store.local_copy(str(base[0]["path"])), steps, data_round, work
    )
    from touchstone.checkpoint import checkpoint_hash

    digest = checkpoint_hash(model)
    config = EvalConfig(attempts=loop.k, likelihood=False)  # sampled as the round was; compared on attempts only
    with publishing(context, storage) as out:
        control = heldout_metrics(
            context, store, str(model), digest, f"control-{round_key}", work / digest[:16], out, config,
            sandbox=sandbox, policy=policy, verifier=verifier, server=server,
        )  # fmt: skip
        pl.DataFrame([control.flat()]).write_parquet(out / "metrics.parquet")
        loop_attempts = read_parquet(loop_file.with_name("attempts.parquet"))
        comparison = compare_to_control(
            loop, control, steps, data_round, loop_attempts, read_parquet(out / "attempts.parquet"), config.bootstrap
        )
        (out / "comparison.json").write_text(comparison.model_dump_json(indent=2) + "\n")
        (out / "comparison.md").write_text(comparison.markdown())
        shutil.copytree(model, out / "model")
    return dg.MaterializeResult(
        metadata={
            "steps": dg.MetadataValue.int(steps),
            "data_round": dg.MetadataValue.text(data_round),
            "checkpoint_hash": dg.MetadataValue.text(digest),
            "pass_at_1": dg.MetadataValue.float(control.pass_at_1.value),
            f"pass_at_{control.k}": dg.MetadataValue.float(control.pass_at_k.value),
            "loop_verdict": dg.MetadataValue.text(comparison.verdict),
            f"loop_minus_control_pass_at_{control.k}": dg.MetadataValue.float(comparison.difference_at_k.value),
            "comparison": dg.MetadataValue.md(comparison.markdown()),
        }
    )


def lineage_steps(instance: dg.DagsterInstance, round_key: str) -> tuple[int, str]:
    """Optimizer steps the round's checkpoint has had in all (the `max_steps` of every trained
    checkpoint on its lineage back to the base; a no-update round adds none), and the first
    round on it that trained: whose data is "round 0's" for the control."""
    steps, first, key = 0, "", round_key
    while key != BASE_ROUND:
        found = latest_metadata(instance, dg.AssetKey(Asset.CHECKPOINT), key)
        if found is None:
            raise dg.Failure(f"round {round_key}'s lineage: round {key} has no checkpoint")
        if found[0].get("updated"):
            steps, first = steps + int(found[0]["max_steps"]), key
        key = str(found[0].get("parent_round", BASE_ROUND))
    if not steps:
        raise dg.Failure(f"round {round_key}'s checkpoint is the base model (no round trained): nothing to control")
    return steps, first


def _train_control(
    context, store, trainer: TrainerResource, pipes, base: str, steps: int, data_round: str, work: Path
) -> Path:
    """The base trained `steps` steps on `data_round`'s data (with the rounds' replay settings);
    kept in `work` so that a rerun whose evaluation was cut off does not train again."""
    out = work / f"model-{data_round}-{steps}"
    if (out / "checkpoint.json").is_file():
        return out
    train_on_round_data(
        context, pipes, store, trainer, data_round, base=base, out=out, label=f"control-{context.partition_key}",
        config=trainer.trainer_config() | {"max_steps": steps},
    )  # fmt: skip
    return out
