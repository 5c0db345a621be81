"""Which checkpoint a round starts from, found from materialization records.

Dynamic partitions cannot declare a dependency on their own previous partition,
so round N looks up the latest materialization of `checkpoint` for round N-1
(round 0: `base_model`) and records what it found in its own metadata.
"""

from __future__ import annotations

from pydantic import BaseModel

import dagster as dg

from orchestration.partitions import previous_round, registered_rounds
from touchstone.paths import Asset

BASE_MODEL = dg.AssetKey(Asset.BASE_MODEL)
CHECKPOINT = dg.AssetKey(Asset.CHECKPOINT)
EVALUATION = dg.AssetKey(Asset.ROUND_EVALUATION)
BASE_ROUND = "base"  # a lineage's first link: the base model (and its evaluation's label)


class CheckpointRef(BaseModel):
    """A checkpoint and where it came from."""

    path: str
    checkpoint_hash: str
    round: str | None  # None: the base model
    run_id: str


def latest_metadata(
    instance: dg.DagsterInstance, key: dg.AssetKey, partition: str | None = None
) -> tuple[dict, str] | None:
    """Metadata (raw values) and run id of the latest materialization, or None."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=key, asset_partitions=[partition] if partition else None),
        limit=1,
    ).records
    if not records:
        return None
    event = records[0].event_log_entry
    materialization = event.asset_materialization
    return {k: v.value for k, v in materialization.metadata.items()}, event.run_id


def starting_checkpoint(instance: dg.DagsterInstance, round_key: str) -> CheckpointRef:
    """Round N's starting weights: the checkpoint the promotion gate of round N-1
    chose (the best so far, docs/ROUNDS.md; the base when no round has beaten it),
    round N-1's own checkpoint when that round has no evaluation, or the base model
    for round 0."""
    prev = previous_round(round_key)
    chosen = prev
    if prev:
        evaluated = latest_metadata(instance, EVALUATION, prev)
        chosen = str(evaluated[0].get("next_checkpoint_round") or prev) if evaluated else prev
    if chosen == BASE_ROUND:
        chosen = None
    key, partition = (CHECKPOINT, chosen) if chosen else (BASE_MODEL, None)
    found = latest_metadata(instance, key, partition)
    if found is None:
        what = f"the checkpoint of round {chosen}" if chosen else "base_model"
        raise dg.Failure(f"round {round_key} starts from {what}, which has not been materialized: materialize it first")
    metadata, run_id = found
    return CheckpointRef(
        path=str(metadata["path"]),
        checkpoint_hash=str(metadata["checkpoint_hash"]),
        round=chosen,
        run_id=run_id,
    )


def lineage_metadata(ref: CheckpointRef) -> dict[str, dg.MetadataValue]:
    return {
        "parent_round": dg.MetadataValue.text(ref.round or BASE_ROUND),
        "parent_checkpoint": dg.MetadataValue.path(ref.path),
        "parent_checkpoint_hash": dg.MetadataValue.text(ref.checkpoint_hash),
        "parent_run": dg.MetadataValue.dagster_run(ref.run_id),
    }


def evaluated_rounds(instance: dg.DagsterInstance) -> list[str]:
    """The registered rounds whose evaluation has been materialized: the finished ones, in order."""
    return [key for key in registered_rounds(instance) if latest_metadata(instance, EVALUATION, key) is not None]


def unfinished_round(instance: dg.DagsterInstance) -> str | None:
    """The latest registered round when it has not been evaluated yet."""
    keys = registered_rounds(instance)
    if keys and latest_metadata(instance, EVALUATION, keys[-1]) is None:
        return keys[-1]
    return None
