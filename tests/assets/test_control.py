"""Expert iteration's control arm: the base trained as many steps as a round's lineage on
round 0's data alone, evaluated on the same held-out tasks, compared with the round."""

from __future__ import annotations

import json

import dagster as dg
import polars as pl
import pytest

from assets.control import lineage_steps
from orchestration.partitions import register_round
from orchestration.runner import materialize
from tests.assets.conftest import TINY_CONFIG, tiny_resources
from tests.assets.test_promotion import attempts, metrics
from touchstone.checkpoint import checkpoint_hash, read_manifest
from touchstone.evaluate.control import compare_to_control
from touchstone.paths import Asset


def _compare(loop_solved: int, control_solved: int, control_n: int = 40):
    """The loop solving tasks t0.. t{loop_solved-1} against a control solving t0.. t{control_solved-1}."""
    return compare_to_control(
        metrics("r002", loop_solved), metrics("control", control_solved, n=control_n), 18, "r000",
        attempts("r002", loop_solved), attempts("control", control_solved, n=control_n), resamples=300,
    )  # fmt: skip


def test_the_verdict_is_the_paired_difference_of_the_two_arms_on_the_same_tasks():
    assert _compare(30, 10).verdict == "above" and _compare(10, 30).verdict == "below"
    # 18 against 12 of 40: the arms' intervals overlap, but the loop solves every task the control
    # does and six more, which a paired bootstrap resolves
    ahead = _compare(18, 12)
    assert (ahead.interval_verdict, ahead.verdict) == ("within", "above")
    assert ahead.difference_at_k.value == pytest.approx(6 / 40) and ahead.difference_at_k.low > 0
    assert "paired difference's interval lies above 0" in ahead.markdown()
    tied = _compare(13, 12)  # one task apart: the paired interval holds 0
    assert tied.verdict == "within" and "no gain of the loop shown" in tied.markdown()
    with pytest.raises(ValueError, match="evaluated differently: loop 40 tasks x 1, control 20 x 1"):
        _compare(12, 10, control_n=20)


def _checkpoint(instance, partition: str, parent: str, updated: bool = True, steps: int = 6):
    metadata = {"path": f"/ck/{partition}", "checkpoint_hash": partition, "updated": updated, "parent_round": parent}
    metadata |= {"max_steps": steps} if updated else {}
    instance.report_runless_asset_event(dg.AssetMaterialization("checkpoint", partition=partition, metadata=metadata))


def test_the_control_s_steps_follow_the_lineage_the_gate_chose():
    instance = dg.DagsterInstance.ephemeral()
    for key in ("r000", "r001", "r002", "r003"):
        register_round(instance, key)
    _checkpoint(instance, "r000", "base", steps=6)
    _checkpoint(instance, "r001", "r000", steps=8)
    _checkpoint(instance, "r002", "r000", steps=5)  # r001 was not promoted: r002 went on from r000
    _checkpoint(instance, "r003", "r002", updated=False)  # nothing verified: kept r002's weights
    assert lineage_steps(instance, "r001") == (14, "r000")
    assert lineage_steps(instance, "r003") == (11, "r000")
    _checkpoint(instance, "r000", "base", updated=False)  # round 0 verified nothing: round 1's data is the first
    assert lineage_steps(instance, "r001") == (8, "r001")
    with pytest.raises(dg.Failure, match="round r004 has no checkpoint"):
        lineage_steps(instance, "r004")


@pytest.mark.slow
def test_the_control_arm_of_a_real_round_trains_the_base_and_compares_on_the_same_tasks(rounds):
    with pytest.MonkeyPatch.context() as mp:
        for k, v in rounds.env.items():
            mp.setenv(k, v)
        result = materialize(rounds.instance, [Asset.CONTROL_EVALUATION], partition_key="r001",
                             resources=tiny_resources(rounds.home), run_config=TINY_CONFIG)  # fmt: skip
    assert result.success
    done = rounds.store.asset_dir(Asset.CONTROL_EVALUATION, "r001")
    comparison = json.loads((done / "comparison.json").read_text())
    steps, data_round = lineage_steps(rounds.instance, "r001")
    assert comparison["steps"] == steps and comparison["data_round"] == data_round
    loop = pl.read_parquet(rounds.store.asset_dir(Asset.ROUND_EVALUATION, "r001") / "metrics.parquet")
    assert comparison["loop_pass_at_k"]["value"] == loop["pass_at_k"][0]
    control = pl.read_parquet(done / "metrics.parquet")
    assert control["n_tasks"][0] == loop["n_tasks"][0] and control["k"][0] == loop["k"][0]  # the same held-out tasks
    assert control["imitation_nll"][0] is None  # compared on sampled attempts only: no likelihood figures
    manifest = read_manifest(done / "model")  # the base, trained as many steps as the round's lineage
    assert manifest.parent_hash == checkpoint_hash(rounds.store.asset_dir(Asset.BASE_MODEL))
    assert manifest.metrics["steps"] == steps
