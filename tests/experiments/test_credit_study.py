"""The credit-assignment study: the same verified runs, four ways of weighting
their turns, several seeds, metrics that do not read the weights."""

from __future__ import annotations

import json

import polars as pl
import pytest
from click.testing import CliRunner

from cli import main
from touchstone.data.schema import SFTRow, read_rows
from touchstone.experiments.credit_study import CREDIT_ARMS, METRICS, fix_turn, shuffled, summarize, turn_phase
from touchstone.verify.report import ProgressPoint, VerificationReport


def test_a_shuffle_permutes_the_trained_turns_only_and_the_fix_turn_is_the_first_full_pass():
    weights = [0.1, 2.5, 0.0, 1.3, 0.1]
    for seed in range(5):
        out = shuffled(weights, seed, "t-1")
        assert out[2] == 0.0 and sorted(out) == sorted(weights)
    assert len({tuple(shuffled(weights, s, "t-1")) for s in range(10)}) > 1
    points = [
        ProgressPoint(turn=t, step=t, tool="bash", passed=p, total=2, fraction=p / 2)
        for t, p in ((1, 1), (3, 2), (4, 2))
    ]
    report = VerificationReport(trajectory_id="t", task_id="x", task_hash="h", progress=points)
    assert fix_turn(report) == 3 and fix_turn(report.model_copy(update={"progress": None})) is None
    assert [turn_phase(t, 3) for t in (0, 3, 5)] == ["before", "fix", "after"]
    rows = [dict.fromkeys(METRICS, v) for v in (0.2, 0.4, 0.9)]
    s = summarize(rows)["pass_at_k"]
    assert s["n"] == 3 and s["low"] < s["value"] < s["high"] and s["value"] == pytest.approx(0.5)


@pytest.mark.heavy  # rollouts, verification with progress, 4 arms x 2 seeds of training and evaluation: 40+ min
@pytest.mark.timeout(2400)
def test_the_quick_study_reports_every_arm_with_intervals_and_trains_on_progress_weights(
    tmp_path, tiny_task_sets, tiny_model
):
    out = tmp_path / "credit"
    args = ["experiment", "credit", "--quick", "--json", "--set=backend=bwrap", "--out", str(out)]
    args += ["--tasks", str(tiny_task_sets[0]), "--heldout", str(tiny_task_sets[1]), "--base", str(tiny_model)]
    printed = CliRunner().invoke(main, args)
    assert printed.exit_code == 0, printed.output
    result = json.loads(printed.stdout)
    assert list(result["arms"]) == list(CREDIT_ARMS)
    assert result["data"]["with_progress"] > 0 and result["data"]["reference_runs"] > 0
    for arm, data in result["arms"].items():
        assert [r["seed"] for r in data["rows"]] == [0, 1] and all(r["round"] == 0 for r in data["rows"])
        for name in ("pass_at_k", "nll_before_fix", "nll_fix", "action_agreement"):
            s = data["summary"][name]
            assert s is not None and s["n"] == 2 and s["low"] <= s["value"] <= s["high"], (arm, name, s)
    weights = {arm: result["arms"][arm]["rows"][0]["weights"] for arm in CREDIT_ARMS}
    assert weights["progress"]["mean_abs_dev"] > 0 and weights["uniform"]["mean_abs_dev"] == 0  # progress points are on
    assert weights["shuffled"]["mean_abs_dev"] == pytest.approx(weights["progress"]["mean_abs_dev"])

    def rows(arm: str, seed: int = 0) -> dict[str, list[float]]:
        path = out / arm / f"s{seed:03d}" / "data" / "sft.parquet"
        return {r["trajectory_id"]: r["turn_weights"] for r in read_rows(path, SFTRow)}

    progress, mixed = rows("progress"), rows("shuffled")
    assert progress.keys() == mixed.keys()
    assert all(sorted(progress[t]) == sorted(mixed[t]) for t in progress)  # the same values, per run
    assert any(progress[t] != mixed[t] for t in progress)  # not where they fall
    rl = pl.read_parquet(out / "outcome_rl" / "s000" / "data" / "rl.parquet")
    assert all(len(set(a)) == 1 for a in rl["turn_advantages"].to_list())  # outcome only: one advantage per run
    assert (out / "credit.png").read_bytes()[:4] == b"\x89PNG" and "| outcome_rl | 2 |" in (
        out / "report.md"
    ).read_text()
