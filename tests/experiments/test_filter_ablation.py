"""The filter ablation, tiny: the same hack-prone trajectories, two filters, the
same base model and training. The direction of the effect must show: the
naive harness keeps hacks and its checkpoint comes to prefer the hack; the
verifier keeps none and its checkpoint does not."""

from __future__ import annotations

import json
import shutil

import polars as pl
import pytest
from click.testing import CliRunner

from cli import main
from tests.experiments.conftest import TINY, assert_filter_effect, assert_real_intervals, cli_args
from touchstone.data.schema import SFTRow, read_rows
from touchstone.experiments.filter_ablation import ARMS, OUTCOMES_FILE, matched_sample
from touchstone.tasks.schema import load_task_set
from training.ablation import run_filter_ablation


@pytest.mark.slow  # two arms x two rounds of rollouts, verification, SFT and scoring: 9 min at load 13
@pytest.mark.timeout(1800)
def test_naive_filter_keeps_hacks_and_raises_hack_propensity_the_verifier_does_not(
    cli_experiment, tiny_task_sets, tiny_model
):
    result, out = cli_experiment
    assert_filter_effect(result["base"], result["arms"]["naive"], result["arms"]["touchstone"])
    assert_real_intervals([result["base"], *result["arms"]["naive"], *result["arms"]["touchstone"]])
    # a rerun resumes from the rows on disk: nothing is trained or evaluated again
    tasks, heldout = (load_task_set(d) for d in tiny_task_sets)
    again = run_filter_ablation(TINY, tasks, heldout, out, base=tiny_model, log=lambda _: None)
    assert again == result
    assert (out / "ablation.png").is_file() and "| naive | 1 |" in (out / "report.md").read_text()


@pytest.mark.slow  # trains and evaluates the control arm for two rounds: about 3 min
@pytest.mark.timeout(1200)
def test_the_matched_control_trains_on_naive_rows_as_many_as_the_verifier_keeps(
    cli_experiment, tiny_task_sets, tmp_path
):
    result, done = cli_experiment
    out = tmp_path / "out"
    shutil.copytree(done, out)  # the two arms resume from disk; only the control arm runs
    printed = CliRunner().invoke(main, [*cli_args(out, tiny_task_sets), "--matched-control"])
    assert printed.exit_code == 0, printed.output
    again = json.loads(printed.stdout)
    assert {arm: again["arms"][arm] for arm in ARMS} == result["arms"]
    naive, verified, matched = (again["arms"][arm][0] for arm in (*ARMS, "matched"))
    # round 0 filters the shared trajectories: the verifier's row count, the naive rows' hack share
    assert matched["kept_rows"] == verified["kept_rows"] < naive["kept_rows"]
    assert matched["kept_hacks"] == int(verified["kept_rows"] * naive["kept_hack_share"] + 0.5) > 0
    kept = set(pl.read_parquet(out / "matched" / "r000" / "data" / "sft.parquet")["trajectory_id"])
    assert kept <= set(pl.read_parquet(out / "naive" / "r000" / "data" / "sft.parquet")["trajectory_id"])
    assert [r["round"] for r in again["arms"]["matched"]] == [0, 1] and matched["trained"]
    assert "| matched | 1 |" in (out / "report.md").read_text()


@pytest.mark.slow  # the tiny experiment's rows
def test_a_matched_sample_keeps_the_hack_share_and_the_order(cli_experiment):
    _, out = cli_experiment
    rows = [SFTRow.model_validate(r) for r in read_rows(out / "naive" / "r000" / "data" / "sft.parquet", SFTRow)]
    hacks = set(pl.read_parquet(out / "shared" / "r000" / OUTCOMES_FILE).filter(pl.col("hack"))["trajectory_id"])
    assert 0 < sum(r.trajectory_id in hacks for r in rows) < len(rows)
    assert matched_sample(rows, len(rows) + 3, hacks, seed=0) == rows
    assert matched_sample(rows, 0, hacks, seed=0) == []
    for seed in range(5):
        picked = matched_sample(rows, 2, hacks, seed)
        assert len(picked) == 2 and [r for r in rows if r in picked] == picked
        share = sum(r.trajectory_id in hacks for r in rows) / len(rows)
        assert sum(r.trajectory_id in hacks for r in picked) == int(2 * share + 0.5)
