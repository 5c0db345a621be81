"""base_evaluation: the base model on the held-out tasks, where the rounds start (and the
promotion gate's incumbent until a round beats it). round_evaluation: the round's checkpoint
on the same tasks, k attempts each, graded by the same independent verifier; figures for the
base, this and earlier rounds side by side, as a plot and a Markdown report."""

import base64
from collections.abc import Callable

import dagster as dg
import polars as pl

from orchestration.heldout import heldout_metrics
from orchestration.lineage import BASE_ROUND, latest_metadata
from orchestration.partitions import rounds_partitions
from orchestration.policy_server import PolicyServerResource
from orchestration.publishing import publishing
from orchestration.resources import (
    EvalConfig,
    HeldoutEvalConfig,
    PolicyResource,
    SandboxResource,
    StorageResource,
    VerifierResource,
)
from orchestration.storage import read_parquet
from touchstone.evaluate.schema import RoundMetrics
from touchstone.paths import Asset


@dg.asset(group_name="sources", deps=[Asset.BASE_MODEL, Asset.HELDOUT_TASKS], kinds={"python"}, pool="sandbox")
def base_evaluation(
    context: dg.AssetExecutionContext,
    config: HeldoutEvalConfig,
    storage: StorageResource,
    sandbox: SandboxResource,
    policy: PolicyResource,
    verifier: VerifierResource,
    server: PolicyServerResource,
) -> dg.MaterializeResult:
    """The base model (after its warm start, when configured) sampled and graded as a round's
    checkpoint is: round 0's starting point in every report, and the checkpoint a round
    trained from the base must not fall below (the promotion gate)."""
    store = storage.store()
    found = latest_metadata(context.instance, dg.AssetKey(Asset.BASE_MODEL))
    if found is None:
        raise dg.Failure("base_model has not been materialized: materialize it first")
    ckpt_path, ckpt_hash = str(found[0]["path"]), str(found[0]["checkpoint_hash"])
    work = store.work_dir(Asset.BASE_EVALUATION) / ckpt_hash[:16]
    with publishing(context, storage) as out:
        metrics = heldout_metrics(
            context, store, store.local_copy(ckpt_path), ckpt_hash, BASE_ROUND, work, out, config,
            sandbox=sandbox, policy=policy, verifier=verifier, server=server,
        )  # fmt: skip
        pl.DataFrame([metrics.flat()]).write_parquet(out / "metrics.parquet")
    return dg.MaterializeResult(
        metadata={
            "pass_at_1": dg.MetadataValue.float(metrics.pass_at_1.value),
            f"pass_at_{config.attempts}": dg.MetadataValue.float(metrics.pass_at_k.value),
            "checkpoint_hash": dg.MetadataValue.text(ckpt_hash),
        }
    )


@dg.asset(
    partitions_def=rounds_partitions,
    group_name="round",
    deps=[Asset.CHECKPOINT, Asset.HELDOUT_TASKS],
    kinds={"python"},
    pool="sandbox",
)
def round_evaluation(
    context: dg.AssetExecutionContext,
    config: EvalConfig,
    storage: StorageResource,
    sandbox: SandboxResource,
    policy: PolicyResource,
    verifier: VerifierResource,
    server: PolicyServerResource,
) -> dg.MaterializeResult:
    """pass@1 / pass@k (bootstrap 95%), hack-attempt rate, valid tool-call rate, progress, turns,
    tokens, exit reasons; imitation NLL, hack propensity and valid tool calls sampled at the
    states of the held-out reference runs."""
    from touchstone.evaluate import earlier_rounds, markdown_report, plot_rounds

    store = storage.store()
    round_key = context.partition_key
    found = latest_metadata(context.instance, dg.AssetKey(Asset.CHECKPOINT), round_key)
    if found is None:
        raise dg.Failure(f"round {round_key} has no checkpoint to evaluate: materialize it first")
    if found[0].get("updated") is False:
        return _no_update(context, storage, config, found[0])
    ckpt_path, ckpt_hash = str(found[0]["path"]), str(found[0]["checkpoint_hash"])
    metrics_files = store.round_files(Asset.ROUND_EVALUATION, "metrics.parquet")
    earlier = _base_metrics(store) + earlier_rounds(
        {key: read_parquet(path) for key, path in metrics_files.items()}, round_key
    )
    # Resumable like raw_trajectories: the work dir survives a killed run.
    work = store.work_dir(Asset.ROUND_EVALUATION, round_key) / ckpt_hash[:16]
    with publishing(context, storage) as out:
        metrics = heldout_metrics(
            context, store, store.local_copy(ckpt_path), ckpt_hash, round_key, work, out, config,
            sandbox=sandbox, policy=policy, verifier=verifier, server=server,
        )  # fmt: skip
        metrics = metrics.model_copy(update={"own_row_share": _own_row_share(store, round_key)})
        pl.DataFrame([metrics.flat()]).write_parquet(out / "metrics.parquet")
        decision = _promotion(
            metrics, earlier, str(found[0].get("parent_checkpoint_hash", "")), config,
            lambda label: read_parquet(out / "attempts.parquet" if label == round_key else _attempts_file(store, label)),
        )  # fmt: skip
        (out / "promotion.json").write_text(decision.model_dump_json(indent=2) + "\n")
        rounds = [*earlier, metrics]
        plot_rounds(rounds, out / "rounds.png")
        report = markdown_report(rounds, plot_file="rounds.png") + _selfplay_section(store, round_key)
        (out / "report.md").write_text(report)
    done = store.asset_dir(Asset.ROUND_EVALUATION, round_key)
    return dg.MaterializeResult(
        metadata={
            "pass_at_1": dg.MetadataValue.float(metrics.pass_at_1.value),
            f"pass_at_{config.attempts}": dg.MetadataValue.float(metrics.pass_at_k.value),
            "hack_attempt_rate": dg.MetadataValue.float(metrics.hack_attempt_rate),
            **_optional_floats(
                imitation_nll=metrics.imitation_nll and metrics.imitation_nll.value,
                hack_propensity=metrics.hack_propensity and metrics.hack_propensity.value,
                valid_tool_call_rate=metrics.valid_tool_call_rate and metrics.valid_tool_call_rate.value,
                matched_valid_call_rate=metrics.matched_valid_call_rate and metrics.matched_valid_call_rate.value,
                mean_progress=metrics.mean_progress,
            ),
            "mean_turns": dg.MetadataValue.float(metrics.mean_turns),
            # The plot inline (a data URI): the UI shows it without serving files.
            "report": dg.MetadataValue.md(report.replace("(rounds.png)", f"({_data_uri(done / 'rounds.png')})")),
            "plot_path": dg.MetadataValue.path(str(done / "rounds.png")),
            "report_path": dg.MetadataValue.path(str(done / "report.md")),
            "checkpoint_hash": dg.MetadataValue.text(ckpt_hash),
            **_gate_metadata(decision),
        }
    )


def _no_update(context, storage: StorageResource, config: EvalConfig, checkpoint: dict) -> dg.MaterializeResult:
    """The round kept its starting weights (checkpoint `updated` false): nothing new to
    evaluate. The gate records no update; the next round starts from the kept checkpoint
    (its round, or this round's record of the base weights)."""
    from touchstone.evaluate.promotion import no_update

    parent = str(checkpoint["parent_round"])
    kept = context.partition_key if parent == BASE_ROUND else parent
    decision = no_update(
        kept, str(checkpoint["checkpoint_hash"]), str(checkpoint["no_update"]), config.promotion_policy()
    )
    with publishing(context, storage) as out:
        (out / "promotion.json").write_text(decision.model_dump_json(indent=2) + "\n")
    return dg.MaterializeResult(
        metadata={
            "checkpoint_hash": dg.MetadataValue.text(str(checkpoint["checkpoint_hash"])),
            "updated": dg.MetadataValue.bool(False),
            **_gate_metadata(decision),
        }
    )


def _gate_metadata(decision) -> dict[str, dg.MetadataValue]:
    """The promotion gate (check `promotion_gate`): which checkpoint round N+1 starts from."""
    return {
        "promoted": dg.MetadataValue.bool(decision.promoted),
        "next_checkpoint_round": dg.MetadataValue.text(decision.next_round),
        "next_checkpoint_hash": dg.MetadataValue.text(decision.next_checkpoint_hash or ""),
        "promotion_reason": dg.MetadataValue.text(decision.reason),
    }


def _base_metrics(store) -> list[RoundMetrics]:
    """base_evaluation's figures (labelled `base`), when it has been materialized."""
    path = store.asset_dir(Asset.BASE_EVALUATION) / "metrics.parquet"
    return [RoundMetrics.from_flat(read_parquet(path).row(0, named=True))] if path.exists() else []


def _attempts_file(store, label: str):
    """The attempt table of the evaluation labelled `label` (`base` or a round key)."""
    if label == BASE_ROUND:
        return store.asset_dir(Asset.BASE_EVALUATION) / "attempts.parquet"
    return store.asset_dir(Asset.ROUND_EVALUATION, label) / "attempts.parquet"


def _promotion(
    metrics: RoundMetrics,
    earlier: list[RoundMetrics],
    parent_hash: str,
    config: EvalConfig,
    attempts: Callable[[str], pl.DataFrame] | None = None,
):
    """The gate's decision against the checkpoint this round trained from: the evaluation of
    those very weights (found by hash: a round that kept the base, or another round's weights,
    is evaluated under that name) with the same k, when there is one. The `paired` rule reads
    both evaluations' attempt tables through `attempts` (an evaluation's label -> its table)."""
    from touchstone.evaluate.metrics import paired_interval, per_task_difference
    from touchstone.evaluate.promotion import decide

    parent = [m for m in earlier if m.checkpoint_hash == parent_hash]
    same = [m for m in parent if m.k == metrics.k]
    incumbent = same[-1] if same else None
    difference = None
    if incumbent is not None and config.promotion_rule == "paired":
        if attempts is None:
            raise ValueError("the paired promotion rule needs the evaluations' attempt tables")
        table = per_task_difference(attempts(metrics.round), attempts(incumbent.round), metrics.k)
        at_1, at_k = paired_interval(table, config.bootstrap)
        difference = at_k if config.promotion_metric == "pass_at_k" else at_1
    decision = decide(metrics, incumbent, config.promotion_policy(), difference)
    if parent and not same:  # say so: configure both evaluations' `attempts` alike to compare
        ks = ", ".join(f"{m.round} k={m.k}" for m in parent)
        decision = decision.model_copy(update={"reason": f"{decision.reason}: the parent's evaluation ({ks}) "
                                                         f"sampled another k than this round's {metrics.k}"})  # fmt: skip
    return decision


def _selfplay_section(store, round_key: str) -> str:
    """The round's self-play section (training_data's selfplay.md), when it proposed."""
    path = store.asset_dir(Asset.TRAINING_DATA, round_key) / "selfplay.md"
    return "\n" + path.read_text() if path.is_file() else ""


def _optional_floats(**values: float | None) -> dict[str, dg.MetadataValue]:
    """Numeric metadata (plotted over rounds in the UI) for the figures a round has."""
    return {k: dg.MetadataValue.float(v) for k, v in values.items() if v is not None}


def _data_uri(path) -> str:
    return "data:image/png;base64," + base64.b64encode(path.read_bytes()).decode()


def _own_row_share(store, round_key: str) -> float | None:
    """The share of the round's SFT rows the model itself wrote (training_data's summary)."""
    from touchstone.data.build import SUMMARY_FILE, read_summary

    data_dir = store.local_dir(Asset.TRAINING_DATA, round_key)
    return read_summary(data_dir).datasets["sft"].own_share if (data_dir / SUMMARY_FILE).is_file() else None
