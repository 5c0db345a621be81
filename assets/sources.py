"""Unpartitioned inputs shared by all rounds: the seed code that proposers
mutate, the base model, and the held-out tasks that evaluation uses and
training never sees."""

import shutil

import dagster as dg

from assets._publish import publishing, table_metadata
from orchestration.resources import HeldoutConfig, SandboxResource, StorageResource, TrainerResource


@dg.asset(group_name="sources", kinds={"python"})
def seed_sources(context: dg.AssetExecutionContext, storage: StorageResource) -> dg.MaterializeResult:
    """Seed code the task proposers mutate, with a content hash per file."""
    from touchstone.tasks.seeds import write_seed_index

    with publishing(context, storage) as out:
        index = write_seed_index(out / "sources.parquet")
    return dg.MaterializeResult(metadata=table_metadata(index))


@dg.asset(group_name="sources", kinds={"pytorch"})
def base_model(
    context: dg.AssetExecutionContext, storage: StorageResource, trainer: TrainerResource
) -> dg.MaterializeResult:
    """The round-0 starting weights: a configured checkpoint or the default tiny model."""
    from training.checkpoint import checkpoint_hash
    from training.model_init import default_model

    source = trainer.base_checkpoint or str(default_model())
    with publishing(context, storage) as out:
        shutil.copytree(source, out, dirs_exist_ok=True)
    path = storage.store().asset_dir("base_model")
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(path)),
            "checkpoint_hash": dg.MetadataValue.text(checkpoint_hash(str(path))),
            "source": dg.MetadataValue.text(source),
        }
    )


@dg.asset(group_name="sources", deps=[seed_sources], kinds={"python"})
def heldout_tasks(
    context: dg.AssetExecutionContext,
    config: HeldoutConfig,
    storage: StorageResource,
    sandbox: SandboxResource,
) -> dg.MaterializeResult:
    """Validated tasks reserved for evaluation; a blocking check keeps them out of training."""
    from assets.tasks import propose_validated

    with publishing(context, storage) as out:
        propose_validated(out, n_tasks=config.n_tasks, proposer="mutation", split="heldout",
                          seed=10_000, sandbox=sandbox)
    return dg.MaterializeResult(metadata=table_metadata(storage.store().asset_dir("heldout_tasks") / "index.parquet"))
