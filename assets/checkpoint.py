"""checkpoint: train the round's weights from its verified data, starting from
the previous round's checkpoint (round 0: base_model). Runs only when the
blocking checks on training_data passed.

Training runs as a Dagster Pipes subprocess (`training.pipes`, under
`accelerate launch` when `trainer.accelerate_config` is set): its log lines,
loss, tokens/s and final metrics reach this step as they happen, and a trainer
exception fails the step with that exception.

A round whose verified data holds no row for the trainer's method trains
nothing: the checkpoint it records is its starting one, marked `updated: false`
with the reason (docs/ROUNDS.md, "No update")."""

import json

import dagster as dg

from orchestration.publishing import publishing
from orchestration.lineage import lineage_metadata, starting_checkpoint
from orchestration.partitions import rounds_partitions
from orchestration.pipes_training import train_on_round_data
from orchestration.resources import StorageResource, TrainerResource
from touchstone.paths import Asset

NO_UPDATE_FILE = "NO_UPDATE.json"


@dg.asset(
    partitions_def=rounds_partitions,
    group_name="round",
    deps=[Asset.TRAINING_DATA, Asset.BASE_MODEL],
    kinds={"pytorch"},
    # Pool gpu: one training at a time; on Kubernetes its pod gets a GPU
    # (orchestration/deploy/k8s_jobs.py).
    pool="gpu",
)
def checkpoint(
    context: dg.AssetExecutionContext,
    storage: StorageResource,
    trainer: TrainerResource,
    pipes: dg.PipesSubprocessClient,
) -> dg.MaterializeResult:
    """Weights + tokenizer + checkpoint.json (manifest with content hash and lineage)."""
    from touchstone.data.build import read_summary
    from training.train import TrainingError, check_config

    try:
        check_config(trainer.method, trainer.trainer_config())  # a typo fails here, before a GPU job starts
    except TrainingError as exc:
        raise dg.Failure(f"trainer config: {exc}") from exc
    store = storage.store()
    round_key = context.partition_key
    start = starting_checkpoint(context.instance, round_key)
    summary = read_summary(store.local_dir(Asset.TRAINING_DATA, round_key))
    empty = summary.nothing_to_train(trainer.method)
    if empty:
        return _no_update(context, storage, start, empty)
    config = trainer.round_config(summary.datasets["sft"].rows)
    with publishing(context, storage) as out:
        reported, replayed = train_on_round_data(
            context, pipes, store, trainer, round_key, base=str(store.local_copy(start.path)), out=out,
            label=round_key, config=config,
        )  # fmt: skip
    path = store.asset_dir(Asset.CHECKPOINT, round_key)
    return dg.MaterializeResult(
        metadata={
            **(reported.metadata or {}),
            "path": dg.MetadataValue.path(str(path)),
            "updated": dg.MetadataValue.bool(True),
            "max_steps": dg.MetadataValue.int(config["max_steps"]),
            **({"rows_by_round": dg.MetadataValue.json(replayed)} if replayed else {}),
            **lineage_metadata(start),
        }
    )


def _no_update(context, storage: StorageResource, start, reason: str) -> dg.MaterializeResult:
    """A round that verified nothing to train on keeps its starting weights: the
    checkpoint it records is the starting one (same path and hash, `updated` false),
    so evaluation, the promotion gate and the next round see an unchanged model,
    never a checkpoint trained on nothing. `NO_UPDATE.json` says so on disk."""
    context.log.warning(f"round {context.partition_key}: no update ({reason}); keeps {start.checkpoint_hash[:12]}")
    record = {"round": context.partition_key, "reason": reason, **start.model_dump()}
    with publishing(context, storage) as out:
        (out / NO_UPDATE_FILE).write_text(json.dumps(record, indent=2) + "\n")
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(start.path),
            "checkpoint_hash": dg.MetadataValue.text(start.checkpoint_hash),
            "updated": dg.MetadataValue.bool(False),
            "no_update": dg.MetadataValue.text(reason),
            **lineage_metadata(start),
        }
    )
