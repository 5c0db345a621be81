"""proposed_tasks: new validated tasks for the round, with rejection reasons."""

from pathlib import Path

import dagster as dg

from assets._publish import publishing, table_metadata
from orchestration.partitions import round_index, rounds_partitions
from orchestration.resources import ProposeConfig, SandboxResource, StorageResource


def propose_validated(
    out: Path, *, n_tasks: int, proposer: str, split: str, seed: int, sandbox: SandboxResource
) -> None:
    """Propose, validate and index tasks into `out` (index.parquet, rejections.parquet)."""
    from touchstone.tasks.proposers import propose

    propose(proposer, out, n=n_tasks, split=split, seed=seed, backend=sandbox.backend, workers=sandbox.workers)


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
    """Tasks proposed for this round; only those that pass validation are indexed."""
    with publishing(context, storage) as out:
        # A per-round seed: each round gets new tasks, a rerun gets the same ones.
        propose_validated(out, n_tasks=config.n_tasks, proposer=config.proposer, split="train",
                          seed=round_index(context.partition_key), sandbox=sandbox)
    done = storage.store().asset_dir("proposed_tasks", context.partition_key)
    metadata = table_metadata(done / "index.parquet")
    if (done / "rejections.parquet").exists():
        metadata |= table_metadata(done / "rejections.parquet")
    return dg.MaterializeResult(metadata=metadata)
