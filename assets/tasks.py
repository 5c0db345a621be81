"""proposed_tasks: new validated tasks for the round, with rejection reasons."""

import dagster as dg
import polars as pl

from orchestration.publishing import publishing, table_metadata
from orchestration.partitions import rounds_partitions
from orchestration.resources import ProposeConfig, SandboxResource, StorageResource
from orchestration.storage import read_parquet
from touchstone.paths import Asset


@dg.asset(
    partitions_def=rounds_partitions,
    group_name="round",
    deps=[Asset.SEED_SOURCES, Asset.HELDOUT_TASKS],
    kinds={"python"},
    pool="sandbox",
)
def proposed_tasks(
    context: dg.AssetExecutionContext,
    config: ProposeConfig,
    storage: StorageResource,
    sandbox: SandboxResource,
) -> dg.MaterializeResult:
    """Tasks proposed and validated for this round; index.parquet lists every
    candidate, kept or rejected with its reason."""
    from touchstone.rounds import round_index
    from touchstone.tasks.contamination import round_sets
    from touchstone.tasks.heldout import exclude_heldout
    from touchstone.tasks.proposers.mutation import propose_mutation
    from touchstone.tasks.validate import ValidationConfig

    store = storage.store()
    round_key = context.partition_key
    heldout = store.local_dir(Asset.HELDOUT_TASKS)
    # a proposed task that copies a held-out task or a configured benchmark is rejected as contaminated
    cfg = ValidationConfig(backend=sandbox.backend, contamination_sets=round_sets(heldout, config.contamination_sets))
    with publishing(context, storage) as out:
        # The round index seeds the proposer: each round gets new tasks, a rerun the same ones.
        propose_mutation(
            out,
            seeds=storage.seed_dirs(),
            n=config.n_tasks,
            workers=sandbox.workers,
            cfg=cfg,
            rng_seed=round_index(round_key),
        )
        excluded = exclude_heldout(out, heldout)
    index = read_parquet(store.asset_dir(Asset.PROPOSED_TASKS, round_key) / "index.parquet")
    reasons = index.filter(pl.col("status") == "rejected")["reason"].value_counts().iter_rows()
    return dg.MaterializeResult(
        metadata={
            **table_metadata(store.asset_dir(Asset.PROPOSED_TASKS, round_key) / "index.parquet"),
            "kept": dg.MetadataValue.int(index.filter(pl.col("status") == "kept").height),
            "excluded_heldout": dg.MetadataValue.int(excluded),
            "rejection_reasons": dg.MetadataValue.json(dict(reasons)),
        }
    )
