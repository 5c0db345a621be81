"""training_data: SFT / RL / preference datasets built only from trajectories
the verifier accepted, each row carrying its lineage."""

import json

import dagster as dg

from orchestration.publishing import publishing, table_metadata
from orchestration.partitions import rounds_partitions
from orchestration.resources import DataBuildConfig, StorageResource
from touchstone.paths import Asset


@dg.asset(
    partitions_def=rounds_partitions,
    group_name="round",
    deps=[Asset.VERIFICATION_REPORTS, Asset.RAW_TRAJECTORIES, Asset.PROPOSED_TASKS],
    kinds={"polars"},
)
def training_data(
    context: dg.AssetExecutionContext, config: DataBuildConfig, storage: StorageResource
) -> dg.MaterializeResult:
    """sft/rl/dpo/kto Parquet files with lineage columns back to task, trajectory and report;
    the proposer's rows (role `proposer`) rewarded from this round's verified outcomes."""
    from touchstone.data.build import build_datasets

    store = storage.store()
    round_key = context.partition_key
    with publishing(context, storage) as out:
        build_datasets(
            reports=store.local_dir(Asset.VERIFICATION_REPORTS, round_key) / "reports.parquet",
            trajectories=store.local_dir(Asset.RAW_TRAJECTORIES, round_key) / "trajectories.parquet",
            out=out,
            round_key=round_key,
            config=config.data_config(),
            proposals=store.local_dir(Asset.PROPOSED_TASKS, round_key),  # the proposer's rows, after verification
        )
    done = store.asset_dir(Asset.TRAINING_DATA, round_key)
    summary = json.loads((done / "summary.json").read_text())
    metadata: dict[str, dg.MetadataValue] = {  # visible per round: what guarded each verdict
        "guards": dg.MetadataValue.json(summary["guards"]),
        "excluded_unguarded": dg.MetadataValue.int(summary["excluded_unguarded"]),
        # expert iteration: who wrote the SFT rows (the model itself, the teacher, ...)
        "sft_authors": dg.MetadataValue.json(summary["datasets"]["sft"].get("authors", {})),
    }
    if summary.get("self_play"):
        metadata["self_play"] = dg.MetadataValue.md((done / "selfplay.md").read_text())
    for name in ("sft", "rl", "dpo", "kto"):
        if (done / f"{name}.parquet").exists():
            metadata |= table_metadata(done / f"{name}.parquet", primary=name == "sft")
    return dg.MaterializeResult(metadata=metadata)
