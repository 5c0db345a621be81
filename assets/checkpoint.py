"""checkpoint: train the round's weights from its verified data, starting from
the previous round's checkpoint (round 0: base_model). Runs only when the
blocking checks on training_data passed."""

import dagster as dg

from orchestration.publishing import publishing
from orchestration.lineage import lineage_metadata, starting_checkpoint
from orchestration.partitions import rounds_partitions
from orchestration.resources import StorageResource, TrainerResource


@dg.asset(
    partitions_def=rounds_partitions,
    group_name="round",
    deps=["training_data", "base_model"],
    kinds={"pytorch"},
    # Pool gpu: one training at a time; on Kubernetes its pod gets a GPU
    # (orchestration/deploy/k8s_jobs.py).
    pool="gpu",
)
def checkpoint(
    context: dg.AssetExecutionContext, storage: StorageResource, trainer: TrainerResource
) -> dg.MaterializeResult:
    """Weights + tokenizer + checkpoint.json (manifest with content hash and lineage)."""
    store = storage.store()
    round_key = context.partition_key
    start = starting_checkpoint(context.instance, round_key)
    data_dir = store.local_dir("training_data", round_key)
    with publishing(context, storage) as out:
        manifest = trainer.train(data_dir=data_dir, start=store.local_copy(start.path), out=out, round_key=round_key)
    path = store.asset_dir("checkpoint", round_key)
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(path)),
            "checkpoint_hash": dg.MetadataValue.text(manifest.content_hash),
            **{k: dg.MetadataValue.float(v) for k, v in manifest.metrics.items()},
            **lineage_metadata(start),
        }
    )
