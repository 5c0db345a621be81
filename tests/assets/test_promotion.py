"""The promotion gate: the decision rules (computed from real attempt tables
with bootstrap intervals) and the next round starting from the chosen checkpoint."""

from __future__ import annotations

import dagster as dg
import polars as pl
import pytest

from orchestration.lineage import starting_checkpoint
from orchestration.partitions import register_round
from touchstone.evaluate import round_metrics
from touchstone.evaluate.promotion import PromotionPolicy, decide


def attempts(round_key: str, solved: int, n: int = 40, hacks: int = 0) -> pl.DataFrame:
    """An attempt table of `n` tasks, one attempt each: tasks t0.. t{solved-1} verified, `hacks` with a finding."""
    return pl.DataFrame(
        {
            "task_id": [f"t{i}" for i in range(n)],
            "trajectory_id": [f"{round_key}-{i}" for i in range(n)],
            "verified": [i < solved for i in range(n)],
            "findings": [int(i < hacks) for i in range(n)],
            "turns": [3] * n,
            "tokens": [10] * n,
            "exit_reason": ["submitted"] * n,
        }
    )


def metrics(round_key: str, solved: int, n: int = 40, hacks: int = 0):
    """Round metrics from `attempts`."""
    table = attempts(round_key, solved, n, hacks)
    return round_metrics(table, round_key=round_key, checkpoint_hash=f"hash-{round_key}", k=1, resamples=300)


def test_point_rule_promotes_the_better_and_keeps_the_incumbent_against_a_worse():
    policy = PromotionPolicy()
    up = decide(metrics("r002", 20), metrics("r001", 10), policy)
    assert up.promoted and up.next_round == "r002" and up.next_checkpoint_hash == "hash-r002"
    down = decide(metrics("r002", 9), metrics("r001", 10), policy)
    assert not down.promoted and down.next_round == "r001" and "worse" in down.reason


@pytest.mark.parametrize("on_tie,promoted", [("keep", False), ("promote", True)])
def test_the_interval_rule_calls_overlapping_intervals_a_tie(on_tie, promoted):
    policy = PromotionPolicy(rule="interval", on_tie=on_tie)
    close = decide(metrics("r002", 14), metrics("r001", 12), policy)  # 0.35 vs 0.30 on 40 tasks: overlap
    assert close.promoted is promoted and close.reason.startswith("tie")
    assert decide(metrics("r002", 36), metrics("r001", 4), policy).promoted  # far apart: a win


def test_more_hack_attempts_block_promotion_whatever_the_pass_rate():
    better_but_hackier = decide(metrics("r002", 30, hacks=5), metrics("r001", 10), PromotionPolicy())
    assert not better_but_hackier.promoted and "hack-attempt rate" in better_but_hackier.reason
    assert decide(
        metrics("r002", 30, hacks=5), metrics("r001", 10), PromotionPolicy(max_hack_rate_increase=0.2)
    ).promoted


def test_the_first_evaluated_round_is_promoted_and_pass_at_k_can_be_the_metric():
    first = decide(metrics("r000", 0), None, PromotionPolicy(metric="pass_at_k"))
    assert first.promoted and first.incumbent is None and first.metric == "pass_at_k"


def _materialize(instance, key: str, partition: str | None = None, **metadata):
    instance.report_runless_asset_event(dg.AssetMaterialization(key, partition=partition, metadata=metadata))


def test_the_next_round_starts_from_the_checkpoint_the_gate_chose():
    instance = dg.DagsterInstance.ephemeral()
    for key in ("r000", "r001", "r002"):
        register_round(instance, key)
    _materialize(instance, "base_model", path="/ck/base", checkpoint_hash="h-base")
    _materialize(instance, "checkpoint", "r000", path="/ck/r000", checkpoint_hash="h0")
    _materialize(instance, "checkpoint", "r001", path="/ck/r001", checkpoint_hash="h1")
    assert starting_checkpoint(instance, "r001").round == "r000"  # r000 not evaluated yet: its own checkpoint
    _materialize(instance, "round_evaluation", "r000", next_checkpoint_round="r000", promoted=True)
    _materialize(instance, "round_evaluation", "r001", next_checkpoint_round="r000", promoted=False)
    start = starting_checkpoint(instance, "r002")  # r001 lost: r002 starts again from r000's weights
    assert (start.round, start.path, start.checkpoint_hash) == ("r000", "/ck/r000", "h0")
    assert starting_checkpoint(instance, "r000").round is None
    # a gate that kept the base (no round beat base_evaluation): the next round starts from the base
    _materialize(instance, "round_evaluation", "r002", next_checkpoint_round="base", promoted=False)
    register_round(instance, "r003")
    start = starting_checkpoint(instance, "r003")
    assert (start.round, start.path, start.checkpoint_hash) == (None, "/ck/base", "h-base")


def test_the_gate_compares_with_the_evaluation_of_the_very_weights_the_round_trained_from():
    from assets.evaluation import _promotion
    from orchestration.resources import EvalConfig

    base, r000, r001 = metrics("base", 20), metrics("r000", 10), metrics("r001", 5)
    config = EvalConfig(promotion_rule="point", on_tie="keep")
    # r001 trained from the base's weights (r000 kept them: no update): it loses to the base, not to r000
    lost = _promotion(r001, [base, r000], "hash-base", config)
    assert not lost.promoted and lost.incumbent_round == "base" and lost.next_round == "base"
    assert _promotion(r001, [base, r000], "hash-r000", config).incumbent_round == "r000"
    # figures with another k are no incumbent: pass@k with another k is another metric
    other_k = base.model_copy(update={"k": 4})
    blind = _promotion(r001, [other_k], "hash-base", config)
    assert blind.incumbent_round is None and "base k=4" in blind.reason


def test_the_paired_rule_decides_on_the_per_task_difference_where_the_intervals_overlap():
    from assets.evaluation import _promotion
    from orchestration.resources import EvalConfig

    # 18 against 12 of 40, the candidate solving every task the incumbent does: the intervals
    # overlap (a tie for the interval rule), the paired difference lies above 0
    tables = {"r000": attempts("r000", 12), "r001": attempts("r001", 18)}
    cand, inc = metrics("r001", 18), metrics("r000", 12)
    interval = _promotion(cand, [inc], "hash-r000", EvalConfig(promotion_rule="interval", on_tie="keep"))
    assert not interval.promoted and interval.reason.startswith("tie")
    paired = _promotion(cand, [inc], "hash-r000", EvalConfig(promotion_rule="paired", on_tie="keep"), tables.get)
    assert paired.promoted and paired.reason.startswith("better") and "paired difference 0.150" in paired.reason
    # the other way round: the same difference below 0 keeps the incumbent
    tables = {"r000": attempts("r000", 18), "r001": attempts("r001", 12)}
    worse = _promotion(metrics("r001", 12), [metrics("r000", 18)], "hash-r000",
                       EvalConfig(promotion_rule="paired", on_tie="promote"), tables.get)  # fmt: skip
    assert not worse.promoted and worse.reason.startswith("worse") and worse.next_round == "r000"
    with pytest.raises(ValueError, match="needs the candidate-minus-incumbent difference"):
        decide(cand, inc, PromotionPolicy(rule="paired"))
