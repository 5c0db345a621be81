"""proposed_tasks: new validated tasks for the round, with rejection reasons."""

import shutil
from pathlib import Path

import dagster as dg
import polars as pl

from assets._publish import publishing, table_metadata
from assets.sources import seed_dirs
from orchestration.partitions import round_index, rounds_partitions
from orchestration.resources import ProposeConfig, SandboxResource, StorageResource
from orchestration.storage import read_parquet


def exclude_heldout(task_set: Path, heldout_set: Path) -> int:
    """Reject kept tasks that share a source unit, id or content hash with a
    held-out task (reason `heldout`), so evaluation tasks never reach training.
    Returns how many were excluded."""
    from touchstone.tasks.index import read_index, write_index

    heldout = [r for r in read_index(heldout_set) if r.status == "kept"]
    units = {r.unit for r in heldout}
    ids, hashes = {r.id for r in heldout}, {r.content_hash for r in heldout}
    rows, excluded = [], 0
    for row in read_index(task_set):
        if row.status == "kept" and (row.unit in units or row.id in ids or row.content_hash in hashes):
            shutil.rmtree(task_set / row.id)
            row = row.model_copy(update={"status": "rejected", "reason": "heldout",
                                         "detail": "shares its source unit with a held-out task"})
            excluded += 1
        rows.append(row)
    write_index(task_set, rows)
    return excluded


@dg.asset(
    partitions_def=rounds_partitions,
    group_name="round",
    deps=["seed_sources", "heldout_tasks"],
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
    from touchstone.tasks.proposers.mutation import propose_mutation
    from touchstone.tasks.validate import ValidationConfig

    store = storage.store()
    round_key = context.partition_key
    with publishing(context, storage) as out:
        # The round index seeds the proposer: each round gets new tasks, a rerun the same ones.
        propose_mutation(out, seeds=seed_dirs(storage), n=config.n_tasks, workers=sandbox.workers,
                         cfg=ValidationConfig(backend=sandbox.backend), rng_seed=round_index(round_key))
        excluded = exclude_heldout(out, store.local_dir("heldout_tasks"))
    index = read_parquet(store.asset_dir("proposed_tasks", round_key) / "index.parquet")
    reasons = index.filter(pl.col("status") == "rejected")["reason"].value_counts().iter_rows()
    return dg.MaterializeResult(
        metadata={
            **table_metadata(store.asset_dir("proposed_tasks", round_key) / "index.parquet"),
            "kept": dg.MetadataValue.int(index.filter(pl.col("status") == "kept").height),
            "excluded_heldout": dg.MetadataValue.int(excluded),
            "rejection_reasons": dg.MetadataValue.json(dict(reasons)),
        }
    )
