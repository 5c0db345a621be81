"""Evaluation figures: pass@k, bootstrap intervals, per-round metrics, plot and report."""

import json

import numpy as np
import polars as pl
import pytest

from touchstone.evaluate.metrics import paired_interval, per_task_difference, wilson_interval
from touchstone.evaluate.schema import Interval, LikelihoodMetrics
from touchstone.evaluate import (
    RoundMetrics,
    attempts_table,
    bootstrap_interval,
    markdown_report,
    pass_at_k,
    plot_rounds,
    round_metrics,
)


def test_pass_at_k_matches_the_closed_form():
    assert pass_at_k(4, 0, 1) == 0.0
    assert pass_at_k(4, 4, 4) == 1.0
    assert pass_at_k(4, 1, 1) == pytest.approx(0.25)
    assert pass_at_k(4, 1, 2) == pytest.approx(0.5)  # 1 - C(3,2)/C(4,2)
    assert pass_at_k(5, 3, 3) == 1.0  # fewer failures than k
    with pytest.raises(ValueError, match="1 <= k <= n"):
        pass_at_k(2, 1, 3)


def test_bootstrap_interval_brackets_the_mean_and_narrows_with_more_tasks():
    rng = np.random.default_rng(1)
    few = bootstrap_interval(rng.integers(0, 2, 10).astype(float))
    many = bootstrap_interval(rng.integers(0, 2, 1000).astype(float))
    for interval in (few, many):
        assert interval.low <= interval.value <= interval.high
    assert many.high - many.low < few.high - few.low


def test_wilson_interval_matches_the_closed_form_and_bounds_a_zero_count():
    three = wilson_interval(3, 10)  # Wilson (1927); e.g. Brown, Cai and DasGupta (2001), table values
    assert three.value == 0.3 and round(three.low, 4) == 0.1078 and round(three.high, 4) == 0.6032
    none = wilson_interval(0, 48)  # no event in 48: the share is 0, but up to 7.4% is not ruled out
    assert none.value == none.low == 0.0 and round(none.high, 4) == 0.0741
    assert wilson_interval(48, 48).high == 1.0
    with pytest.raises(ValueError, match="3 of 2"):
        wilson_interval(3, 2)


def _attempts(verified: dict[str, list[bool]], findings: int = 0) -> pl.DataFrame:
    rows = []
    for task, outcomes in verified.items():
        for i, ok in enumerate(outcomes):
            rows.append(
                {
                    "task_id": task,
                    "trajectory_id": f"{task}-{i}",
                    "verified": ok,
                    "findings": findings,
                    "turns": 3,
                    "tokens": None,
                    "exit_reason": "submitted" if ok else "max_turns",
                }
            )
    return pl.DataFrame(rows, schema_overrides={"tokens": pl.Int64})


def test_round_metrics_from_attempts():
    metrics = round_metrics(
        _attempts({"a": [True, False], "b": [False, False]}, findings=1), round_key="r001", checkpoint_hash="abc", k=2
    )
    assert metrics.pass_at_1.value == pytest.approx(0.25)
    assert metrics.pass_at_k.value == pytest.approx(0.5)
    assert metrics.hack_attempt_rate == 1.0 and metrics.hack_attempt_share == 1.0
    assert metrics.exit_reasons == {"submitted": 1, "max_turns": 3}
    assert metrics.mean_tokens is None
    assert RoundMetrics.from_flat(metrics.flat()) == metrics


def test_round_metrics_refuses_k_above_the_attempts_of_a_task():
    with pytest.raises(ValueError, match="task b has only 1 attempts"):
        round_metrics(_attempts({"a": [True, True], "b": [True]}), round_key="r000", checkpoint_hash=None, k=2)


def test_attempts_table_counts_only_verifier_accepted_attempts_as_solved():
    trajectories = pl.DataFrame(
        {
            "trajectory_id": ["t1", "t2"],
            "task_id": ["a", "a"],
            "n_turns": [2, 4],
            "turns": [json.dumps([{"completion_tokens": 5}, {"completion_tokens": 7}]), json.dumps([])],
            "exit_reason": ["submitted", "submitted"],
            "messages": [json.dumps(_conversation(["submit", "bash"])), json.dumps(_conversation(["nope", None]))],
        }
    )
    reports = pl.DataFrame(
        {
            "trajectory_id": ["t1", "t2"],
            "verdict": ["accept", "reject"],
            "n_findings": [0, 1],
            "progress": [json.dumps([{"fraction": 0.5}, {"fraction": 1.0}]), None],
        }
    )
    table = attempts_table(trajectories, reports)
    assert table["verified"].to_list() == [True, False]
    assert table["findings"].to_list() == [0, 1]
    assert table["tokens"].to_list() == [12, None]
    assert table["valid_turns"].to_list() == [1, 0]  # bash without its command, an unknown tool, no call
    assert table["progress"].to_list() == [0.75, None]
    with pytest.raises(ValueError, match="no verification report"):
        attempts_table(trajectories, reports.head(1))


def _conversation(tools: list[str | None]) -> list[dict]:
    """An assistant turn per entry: a call of that tool with no arguments, or no call (None)."""
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    for i, name in enumerate(tools):
        call = [{"id": f"c{i}", "type": "function", "function": {"name": name, "arguments": "{}"}}] if name else None
        msgs.append({"role": "assistant", "content": "", **({"tool_calls": call} if call else {})})
        msgs.append(
            {"role": "tool", "tool_call_id": f"c{i}", "content": "x"} if call else {"role": "user", "content": "x"}
        )
    return msgs


def test_valid_tool_call_rate_is_per_task_with_an_interval():
    attempts = _attempts({"a": [False, False], "b": [False, False]}).with_columns(
        valid_turns=pl.Series([3, 1, 0, 0]), progress=pl.Series([0.5, None, None, None], dtype=pl.Float64)
    )
    metrics = round_metrics(attempts, round_key="r001", checkpoint_hash=None, k=2)
    assert metrics.valid_tool_call_rate.value == pytest.approx(((3 + 1) / 6 + 0) / 2)  # 3 turns per attempt
    assert metrics.valid_tool_call_rate.low <= metrics.valid_tool_call_rate.value <= metrics.valid_tool_call_rate.high
    assert metrics.mean_progress == 0.5
    assert RoundMetrics.from_flat(metrics.flat()) == metrics


def test_plot_and_report_show_every_round(tmp_path):
    rounds = [
        round_metrics(_attempts({"a": [ok, False]}), round_key=key, checkpoint_hash=key * 4, k=2)
        for key, ok in (("r000", False), ("r001", True))
    ]
    png = plot_rounds(rounds, tmp_path / "rounds.png")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    report = markdown_report(rounds, plot_file="rounds.png")
    assert "| r000 |" in report and "| r001 |" in report and "![" in report
    assert "0.50 [" in report  # r001 pass@2
    assert report.count("| n/a |") >= 2  # rounds evaluated before the likelihood metrics existed


def test_with_one_attempt_the_report_shows_pass_at_1_once():
    one = [round_metrics(_attempts({"a": [True]}), round_key="r000", checkpoint_hash="c" * 4, k=1)]
    table = [line for line in markdown_report(one).splitlines() if line.startswith("| ")][:3]  # sampled attempts
    assert "pass@1" in table[0] and table[0].count("pass@") == 1
    assert len({line.count("|") for line in table}) == 1  # header, separator and row: as many columns


def test_likelihood_figures_travel_through_the_parquet_row_and_the_report(tmp_path):
    likelihood = LikelihoodMetrics(
        imitation_nll=Interval(value=4.2, low=4.0, high=4.4),
        hack_propensity=Interval(value=-1.5, low=-2.0, high=-1.0),
        hack_propensity_by_family={"conftest": -1.0, "exit_early": -2.0},
        n_reference=3,
        n_states=3,
        matched_valid_call_rate=Interval(value=0.625, low=0.5, high=0.75),
    )
    metrics = round_metrics(
        _attempts({"a": [True, False]}), round_key="r002", checkpoint_hash="c", k=2, likelihood=likelihood
    )
    back = RoundMetrics.from_flat(pl.DataFrame([metrics.flat()]).row(0, named=True))
    assert back == metrics and back.hack_propensity_by_family == {"conftest": -1.0, "exit_early": -2.0}
    assert back.matched_valid_call_rate == Interval(value=0.625, low=0.5, high=0.75)
    report = markdown_report([back])
    assert "4.20 [4.00, 4.40]" in report and "conftest: -1.00" in report
    matched = next(line for line in report.splitlines() if "| r002 | 4.20" in line)
    assert matched.endswith("| 0.62 [0.50, 0.75] |")  # the last column of the reference's table
    assert plot_rounds([back], tmp_path / "p.png").stat().st_size > 0


def test_the_paired_difference_is_per_task_and_refuses_different_task_sets():
    loop = _attempts({"a": [True, True], "b": [True, False], "c": [False, False]})
    control = _attempts({"a": [True, False], "b": [True, False], "c": [False, False]})
    at_1, at_k = paired_interval(per_task_difference(loop, control, k=2), resamples=200)
    assert at_1.value == pytest.approx(0.5 / 3)  # task a: 1.0 - 0.5
    assert at_k.value == pytest.approx(0.0)  # pass@2 is 1.0 on a and b in both arms
    assert at_1.low >= 0 and at_k.low == at_k.high == 0
    with pytest.raises(ValueError, match="different tasks, e.g. c"):
        per_task_difference(loop, _attempts({"a": [True, True], "b": [True], "d": [False, False]}), k=1)
