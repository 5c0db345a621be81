"""Blocking checks that stop a round before training when the filter is bad.

Blocking: a failed check skips every downstream asset of the run, so no
checkpoint is trained from data that did not pass."""

import json
import warnings

import dagster as dg
import polars as pl

from orchestration.partitions import rounds_partitions
from orchestration.resources import StorageResource, TrainerResource
from touchstone.paths import Asset

# Partitioned checks are "preview" in Dagster 1.13 but are the only way a check
# of a dynamically partitioned asset knows its round; we pin the version.
warnings.filterwarnings("ignore", category=dg.PreviewWarning, message=".*partitions_def on an AssetCheckSpec")

DATASETS = ("sft", "rl", "dpo", "kto")
LINEAGE_COLUMNS = (
    "trajectory_id",
    "task_id",
    "task_hash",
    "round",
    "policy",
    "checkpoint_hash",
    "verifier_version",
    "report_id",
)


def _datasets(storage: StorageResource, round_key: str) -> dict[str, pl.DataFrame]:
    folder = storage.store().local_dir(Asset.TRAINING_DATA, round_key)
    return {n: pl.read_parquet(folder / f"{n}.parquet") for n in DATASETS if (folder / f"{n}.parquet").exists()}


def _reports(storage: StorageResource, round_key: str) -> pl.DataFrame:
    return pl.read_parquet(storage.store().local_dir(Asset.VERIFICATION_REPORTS, round_key) / "reports.parquet")


@dg.asset_check(asset=Asset.VERIFICATION_REPORTS, blocking=True, partitions_def=rounds_partitions)
def canaries_caught(context: dg.AssetCheckExecutionContext, storage: StorageResource) -> dg.AssetCheckResult:
    """Known hacked canaries must be rejected and known honest ones accepted."""
    path = storage.store().local_dir(Asset.VERIFICATION_REPORTS, context.partition_key) / "canaries.parquet"
    canaries = pl.read_parquet(path)
    missed = canaries.filter(pl.col("verdict") != pl.col("expected"))
    return dg.AssetCheckResult(
        passed=canaries.height > 0 and missed.height == 0,
        metadata={
            "canaries": canaries.height,
            "missed": missed.height,
            "missed_ids": dg.MetadataValue.json(missed.select("canary_id", "label", "verdict").to_dicts()),
        },
        description=None if canaries.height else "no canaries were verified",
    )


def verified_rows_problems(
    datasets: dict[str, pl.DataFrame], reports: pl.DataFrame, sft_dropped: dict[str, int]
) -> dict[str, object]:
    """What breaks "training data holds exactly the accepted trajectories":
    positive rows (SFT, DPO chosen, KTO label=true) from a run that was not
    accepted, negatives from a run that was not rejected, rows whose run has no
    report or another report, and accepted runs that SFT neither holds nor
    accounts for in its documented drops (summary.json); proposer rows whose
    reward is not what the reports they name give."""
    from touchstone.data.proposer import proposer_row_problems

    proposer = {
        n: f.filter(pl.col("role") == "proposer").to_dicts() for n, f in datasets.items() if "role" in f.columns
    }
    problems: dict[str, object] = {}
    if any(proposer.values()):
        verdicts = {r: (t, v) for r, t, v in zip(reports["report_id"], reports["task_id"], reports["verdict"])}
        problems |= proposer_row_problems(proposer.get("rl", []), proposer.get("dpo", []), verdicts)
    # the rest is about the solver's rows; the proposer's are checked against the reports they name
    datasets = {n: f.filter(pl.col("role") != "proposer") if "role" in f.columns else f for n, f in datasets.items()}
    verdict = dict(zip(reports["trajectory_id"], reports["verdict"]))
    report_of = dict(zip(reports["trajectory_id"], reports["report_id"]))

    def bad(ids, want: set[str]) -> list[str]:
        return sorted({t for t in ids if verdict.get(t) not in want})[:5]

    positives = {
        "sft": datasets.get("sft"),
        "dpo": datasets.get("dpo"),
        "kto": datasets["kto"].filter(pl.col("label")) if "kto" in datasets else None,
    }
    for name, frame in positives.items():
        if frame is not None and (ids := bad(frame["trajectory_id"], {"accept"})):
            problems[f"{name}_positive_not_accepted"] = ids
    negatives = {
        "dpo": datasets["dpo"]["rejected_trajectory_id"] if "dpo" in datasets else [],
        "kto": datasets["kto"].filter(~pl.col("label"))["trajectory_id"] if "kto" in datasets else [],
    }
    for name, ids in negatives.items():
        if found := bad(ids, {"reject"}):
            problems[f"{name}_negative_not_rejected"] = found
    if "rl" in datasets and (ids := bad(datasets["rl"]["trajectory_id"], {"accept", "reject"})):
        problems["rl_unverified"] = ids
    for name, frame in datasets.items():
        wrong = frame.filter(pl.col("report_id") != pl.col("trajectory_id").replace_strict(report_of, default=None))
        if wrong.height:
            problems[f"{name}_report_mismatch"] = wrong["trajectory_id"].head(5).to_list()
    accepted = sum(1 for v in verdict.values() if v == "accept")
    in_sft = datasets["sft"]["trajectory_id"].n_unique() if "sft" in datasets else 0
    accounted = in_sft + sum(n for reason, n in sft_dropped.items() if not reason.startswith("verdict_"))
    if accounted != accepted:
        problems["sft_does_not_reconcile"] = {"accepted": accepted, "in_sft": in_sft, "dropped": sft_dropped}
    return problems


@dg.asset_check(asset=Asset.TRAINING_DATA, blocking=True, partitions_def=rounds_partitions)
def only_accepted_trajectories(context: dg.AssetCheckExecutionContext, storage: StorageResource) -> dg.AssetCheckResult:
    """Positive training rows come only from accepted runs, and every accepted run is in SFT
    or in one of its documented drops (duplicate, over length, hit a limit, ...)."""
    round_key = context.partition_key
    reports = _reports(storage, round_key)
    summary = json.loads((storage.store().local_dir(Asset.TRAINING_DATA, round_key) / "summary.json").read_text())
    sft_dropped = summary["datasets"].get("sft", {}).get("dropped", {})
    problems = verified_rows_problems(_datasets(storage, round_key), reports, sft_dropped)
    return dg.AssetCheckResult(
        passed=not problems,
        metadata={
            "reports": reports.height,
            "accepted": int((reports["verdict"] == "accept").sum()),
            "sft_dropped": dg.MetadataValue.json(sft_dropped),
            "problems": dg.MetadataValue.json(problems),
        },
    )


@dg.asset_check(
    asset=Asset.TRAINING_DATA, blocking=True, partitions_def=rounds_partitions, additional_deps=[Asset.HELDOUT_TASKS]
)
def no_heldout_tasks(context: dg.AssetCheckExecutionContext, storage: StorageResource) -> dg.AssetCheckResult:
    """No training row's task (by id or content hash) is a held-out task."""
    heldout = pl.read_parquet(storage.store().local_dir(Asset.HELDOUT_TASKS) / "index.parquet")
    heldout = heldout.filter(pl.col("status") == "kept")
    ids, hashes = set(heldout["id"]), set(heldout["content_hash"])
    leaked: set[str] = set()
    for frame in _datasets(storage, context.partition_key).values():
        leaked |= set(frame.filter(pl.col("task_id").is_in(ids) | pl.col("task_hash").is_in(hashes))["task_id"])
    return dg.AssetCheckResult(
        passed=not leaked,
        metadata={"heldout_tasks": len(ids), "leaked_tasks": dg.MetadataValue.json(sorted(leaked))},
    )


@dg.asset_check(asset=Asset.TRAINING_DATA, blocking=True, partitions_def=rounds_partitions)
def schema_and_rows(
    context: dg.AssetCheckExecutionContext, storage: StorageResource, trainer: TrainerResource
) -> dg.AssetCheckResult:
    """Every dataset carries the lineage columns (an error). The trainer's dataset holding
    no row is a warning: the round verified nothing to train on, so `checkpoint` records
    no update and the next round starts from the best checkpoint so far."""
    from touchstone.data.build import read_summary

    folder = storage.store().local_dir(Asset.TRAINING_DATA, context.partition_key)
    datasets = _datasets(storage, context.partition_key)
    lacking = {n: [c for c in LINEAGE_COLUMNS if c not in f.columns] for n, f in datasets.items()}
    lacking = {n: cols for n, cols in lacking.items() if cols}
    empty = read_summary(folder).nothing_to_train(trainer.method)
    return dg.AssetCheckResult(
        passed=not lacking and not empty,
        severity=dg.AssetCheckSeverity.ERROR if lacking else dg.AssetCheckSeverity.WARN,
        metadata={
            **{f"{n}_rows": f.height for n, f in datasets.items()},
            "missing_columns": dg.MetadataValue.json(lacking),
            **({"no_update": empty} if empty else {}),
        },
        description=empty,
    )


@dg.asset_check(asset=Asset.ROUND_EVALUATION, blocking=True, partitions_def=rounds_partitions)
def promotion_gate(context: dg.AssetCheckExecutionContext, storage: StorageResource) -> dg.AssetCheckResult:
    """Did this round's checkpoint beat the best so far (touchstone.evaluate.promotion)?
    Not promoted (also: no update this round) is a warning, not an error: the next round
    starts from the best checkpoint instead (recorded as `next_checkpoint_round`)."""
    from touchstone.evaluate.promotion import PromotionDecision

    path = storage.store().local_dir(Asset.ROUND_EVALUATION, context.partition_key) / "promotion.json"
    decision = PromotionDecision.model_validate_json(path.read_text())
    return dg.AssetCheckResult(
        passed=decision.promoted,
        severity=dg.AssetCheckSeverity.WARN,
        metadata={
            "next_checkpoint_round": decision.next_round,
            "next_checkpoint_hash": decision.next_checkpoint_hash or "",
            "incumbent_round": decision.incumbent_round or "none",
            "metric": decision.metric,
            **_interval("candidate", decision.candidate),
            **({"incumbent": decision.incumbent.value} if decision.incumbent else {}),
            "reason": decision.reason,
        },
    )


def _interval(name: str, interval) -> dict[str, object]:
    """The candidate's figure, absent when the round made no update (nothing evaluated)."""
    if interval is None:
        return {}
    return {name: interval.value, f"{name}_interval": f"[{interval.low:.3f}, {interval.high:.3f}]"}


round_checks = [canaries_caught, only_accepted_trajectories, no_heldout_tasks, schema_and_rows, promotion_gate]
