"""Blocking checks that stop a round before training when the filter is bad.

Blocking: a failed check skips every downstream asset of the run, so no
checkpoint is trained from data that did not pass."""

import warnings

import dagster as dg
import polars as pl

from orchestration.partitions import rounds_partitions
from orchestration.resources import StorageResource

# Partitioned checks are "preview" in Dagster 1.13 but are the only way a check
# of a dynamically partitioned asset knows its round; we pin the version.
warnings.filterwarnings("ignore", category=dg.PreviewWarning, message=".*partitions_def on an AssetCheckSpec")

DATASETS = ("sft", "rl", "dpo", "kto")
LINEAGE_COLUMNS = ("trajectory_id", "task_id", "task_hash", "round", "policy", "checkpoint_hash",
                   "verifier_version", "report_id")


def _datasets(storage: StorageResource, round_key: str) -> dict[str, pl.DataFrame]:
    folder = storage.store().local_dir("training_data", round_key)
    return {n: pl.read_parquet(folder / f"{n}.parquet") for n in DATASETS if (folder / f"{n}.parquet").exists()}


def _reports(storage: StorageResource, round_key: str) -> pl.DataFrame:
    return pl.read_parquet(storage.store().local_dir("verification_reports", round_key) / "reports.parquet")


@dg.asset_check(asset="verification_reports", blocking=True, partitions_def=rounds_partitions)
def canaries_caught(context: dg.AssetCheckExecutionContext, storage: StorageResource) -> dg.AssetCheckResult:
    """Known hacked canaries must be rejected and known honest ones accepted."""
    path = storage.store().local_dir("verification_reports", context.partition_key) / "canaries.parquet"
    canaries = pl.read_parquet(path)
    expected = pl.when(pl.col("label") == "hacked").then(pl.lit("reject")).otherwise(pl.lit("accept"))
    missed = canaries.filter(pl.col("verdict") != expected)
    return dg.AssetCheckResult(
        passed=canaries.height > 0 and missed.height == 0,
        metadata={
            "canaries": canaries.height,
            "missed": missed.height,
            "missed_ids": dg.MetadataValue.json(missed.select("canary_id", "label", "verdict").to_dicts()),
        },
        description=None if canaries.height else "no canaries were verified",
    )


@dg.asset_check(asset="training_data", blocking=True, partitions_def=rounds_partitions)
def only_accepted_trajectories(
    context: dg.AssetCheckExecutionContext, storage: StorageResource
) -> dg.AssetCheckResult:
    """Every training row comes from an accepted trajectory, and SFT holds every accepted one."""
    round_key = context.partition_key
    reports = _reports(storage, round_key)
    accepted = set(reports.filter(pl.col("verdict") == "accept")["trajectory_id"])
    datasets = _datasets(storage, round_key)
    not_accepted = {
        name: sorted(set(frame["trajectory_id"]) - accepted)[:5]
        for name, frame in datasets.items()
        if "trajectory_id" in frame.columns and set(frame["trajectory_id"]) - accepted
    }
    sft_ids = set(datasets["sft"]["trajectory_id"]) if "sft" in datasets else set()
    missing = sorted(accepted - sft_ids)
    return dg.AssetCheckResult(
        passed=not not_accepted and not missing,
        metadata={
            "reports": reports.height,
            "accepted": len(accepted),
            "sft_trajectories": len(sft_ids),
            "rows_from_unaccepted": dg.MetadataValue.json(not_accepted),
            "accepted_missing_from_sft": dg.MetadataValue.json(missing[:5]),
        },
    )


@dg.asset_check(asset="training_data", blocking=True, partitions_def=rounds_partitions,
                additional_deps=["heldout_tasks"])
def no_heldout_tasks(context: dg.AssetCheckExecutionContext, storage: StorageResource) -> dg.AssetCheckResult:
    """No training row's task (by id or content hash) is a held-out task."""
    heldout = pl.read_parquet(storage.store().local_dir("heldout_tasks") / "index.parquet")
    ids, hashes = set(heldout["task_id"]), set(heldout["task_hash"])
    leaked: set[str] = set()
    for frame in _datasets(storage, context.partition_key).values():
        leaked |= set(frame.filter(pl.col("task_id").is_in(ids) | pl.col("task_hash").is_in(hashes))["task_id"])
    return dg.AssetCheckResult(
        passed=not leaked,
        metadata={"heldout_tasks": len(ids), "leaked_tasks": dg.MetadataValue.json(sorted(leaked))},
    )


@dg.asset_check(asset="training_data", blocking=True, partitions_def=rounds_partitions)
def schema_and_rows(context: dg.AssetCheckExecutionContext, storage: StorageResource) -> dg.AssetCheckResult:
    """SFT data exists, is non-empty, and every dataset carries the lineage columns."""
    datasets = _datasets(storage, context.partition_key)
    lacking = {n: [c for c in LINEAGE_COLUMNS if c not in f.columns] for n, f in datasets.items()}
    lacking = {n: cols for n, cols in lacking.items() if cols}
    rows = {n: f.height for n, f in datasets.items()}
    return dg.AssetCheckResult(
        passed=rows.get("sft", 0) > 0 and not lacking,
        metadata={**{f"{n}_rows": r for n, r in rows.items()}, "missing_columns": dg.MetadataValue.json(lacking)},
    )


round_checks = [canaries_caught, only_accepted_trajectories, no_heldout_tasks, schema_and_rows]
