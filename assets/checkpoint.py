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
import os
import tempfile
from pathlib import Path

import dagster as dg
from dagster._core.errors import DagsterPipesExecutionError  # what a failed Pipes process raises; not re-exported

from orchestration.publishing import publishing
from orchestration.lineage import lineage_metadata, starting_checkpoint
from orchestration.partitions import rounds_partitions
from orchestration.resources import StorageResource, TrainerResource
from touchstone.paths import Asset

NO_UPDATE_FILE = "NO_UPDATE.json"

PROJECT_ROOT = Path(__file__).resolve().parents[1]


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
    data_dir = store.local_dir(Asset.TRAINING_DATA, round_key)
    summary = read_summary(data_dir)
    empty = summary.nothing_to_train(trainer.method)
    if empty:
        return _no_update(context, storage, start, empty)
    config = trainer.round_config(summary.datasets["sft"].rows)
    with publishing(context, storage) as out, tempfile.TemporaryDirectory() as tmp:
        train_dir, replayed = _replay(store, round_key, data_dir, trainer, Path(tmp) / "data")
        params = {
            "method": trainer.method,
            "data_dir": str(train_dir),
            "base": str(store.local_copy(start.path)),
            "out": str(out),
            "round_key": round_key,
            "config": config,
            "error_file": f"{tmp}/error",
        }
        reported = _run_trainer(context, pipes, trainer.pipes_command(params), Path(tmp) / "error")
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


def _replay(store, round_key: str, data_dir: Path, trainer: TrainerResource, out: Path) -> tuple[Path, dict]:
    """The data dir to train on: this round's, or (SFT with `replay_rounds` /
    `replay_warm_start`) its rows followed by the verified rows of earlier rounds
    and of the warm start; with the rows per round."""
    if trainer.method != "sft" or (trainer.replay_rounds <= 0 and not trainer.replay_warm_start):
        return data_dir, {}
    from touchstone.data.replay import replay_dataset
    from touchstone.paths import WARM_START_DATA
    from touchstone.rounds import earlier_round_keys

    keys = earlier_round_keys(store.round_files(Asset.TRAINING_DATA, "sft.parquet"), round_key, trainer.replay_rounds)
    earlier = [store.local_dir(Asset.TRAINING_DATA, k) for k in keys]
    if trainer.replay_warm_start and store.asset_dir(WARM_START_DATA).exists():
        earlier.append(store.local_dir(WARM_START_DATA))
    return out, replay_dataset(data_dir, earlier, out)


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


def _run_trainer(
    context, pipes: dg.PipesSubprocessClient, command: list[str], error_file: Path
) -> dg.MaterializeResult:
    """Run the training command under Pipes; a crash fails the step with the trainer's error."""
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(PROJECT_ROOT), os.environ.get("PYTHONPATH")]))}
    try:
        return pipes.run(command=command, context=context, cwd=str(PROJECT_ROOT), env=env).get_materialize_result()
    except DagsterPipesExecutionError as exc:
        error = error_file.read_text() if error_file.exists() else "no error reported (killed?)"
        raise dg.Failure(f"training failed: {error}") from exc
