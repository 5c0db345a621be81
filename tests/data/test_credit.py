"""Credit assignment on hand-built trajectories with known answers."""

from __future__ import annotations

import pytest

from tests.data.reports import report
from touchstone.data.credit import CreditConfig, credit_group, outcome_reward, progress_rewards, sft_weights
from touchstone.verify.report import ProgressPoint

CFG = CreditConfig(gamma=0.9)


def test_turn_that_fixes_the_bug_gets_the_largest_credit():
    # turns: read, run tests, fix (0 -> 1), run tests, submit; a sibling attempt failed.
    credit = credit_group({"ok": (5, report("ok", "accept", {2: 1.0})), "bad": (3, report("bad", "reject", {}))}, CFG)
    adv = credit["ok"].advantages
    assert max(range(5), key=adv.__getitem__) == 2
    assert adv[2] == pytest.approx(1.0 + 0.5)  # progress 1 + (outcome 1 - group mean 0.5)


def test_turn_that_breaks_passing_tests_gets_negative_credit():
    # fix (0 -> 1), then an edit breaks it again (1 -> 0.25), submit: rejected.
    credit = credit_group(
        {"x": (3, report("x", "reject", {0: 1.0, 1: 0.25})), "y": (2, report("y", "accept", {0: 1.0}))}, CFG
    )
    adv = credit["x"].advantages
    assert adv[1] < 0 and adv[1] == min(adv)
    assert credit["x"].advantages[0] > adv[1]


def test_pure_exploration_turns_get_about_zero():
    # Two successful attempts: exploration long before the fix, or after it.
    credit = credit_group(
        {"early": (12, report("early", "accept", {10: 1.0})), "late": (6, report("late", "accept", {0: 1.0}))}, CFG
    )
    early, late = credit["early"].advantages, credit["late"].advantages
    assert abs(early[0]) < 0.4 and early[10] == pytest.approx(1.0)
    assert late[1:] == pytest.approx([0.0] * 5)  # reading and re-running tests after the fix
    assert late[0] == pytest.approx(1.0)


def test_gamma_one_without_progress_is_plain_outcome_reward():
    cfg = CreditConfig(gamma=1.0)
    credit = credit_group(
        {"a": (4, report("a", "accept")), "b": (7, report("b", "reject")), "c": (2, report("c", "reject"))}, cfg
    )
    mean = 1 / 3
    for tid, outcome in [("a", 1.0), ("b", 0.0), ("c", 0.0)]:
        assert credit[tid].reward == outcome
        assert credit[tid].advantages == pytest.approx([outcome - mean] * len(credit[tid].advantages))
        assert credit[tid].group_advantage == pytest.approx(outcome - mean)


def test_hack_penalty_and_inconclusive():
    cfg = CreditConfig(hack_penalty=2.0)
    assert outcome_reward(report("h", "reject", hack=True), cfg) == -2.0
    assert outcome_reward(report("r", "reject"), cfg) == 0.0
    assert outcome_reward(report("i", "inconclusive"), cfg) is None
    credit = credit_group({"i": (3, report("i", "inconclusive")), "a": (2, report("a", "accept"))}, cfg)
    assert set(credit) == {"a"} and credit["a"].group_advantage == 0.0


def test_run_without_turns_only_counts_for_the_baseline():
    credit = credit_group({"dead": (0, report("dead", "reject")), "ok": (2, report("ok", "accept"))}, CFG)
    assert credit["dead"].advantages == [] and credit["ok"].group_advantage == pytest.approx(0.5)


def test_progress_outside_the_trajectory_is_an_error():
    with pytest.raises(ValueError, match="turn 5"):
        credit_group({"a": (3, report("a", "accept", {5: 1.0}))}, CFG)


def test_tests_that_passed_at_the_start_are_no_turns_progress():
    rep = report("a", "accept", {1: 0.8, 3: 1.0})
    start = ProgressPoint(turn=-1, step=-1, tool="start", passed=4, total=5, fraction=0.8)
    started = rep.model_copy(update={"progress": [start, *rep.progress]})
    assert progress_rewards(4, rep) == pytest.approx([0.0, 0.8, 0.0, 0.2])  # a report without a start point
    # only the fix made progress, and it made all there was to make: the one failing test passes
    assert progress_rewards(4, started) == pytest.approx([0.0, 0.0, 0.0, 1.0])


def test_progress_is_measured_in_the_tests_that_failed_at_the_start():
    """5 of 6 required tests pass on the task as given: half-fixing the failing ones is worth 0.5,
    breaking a passing test costs as much as a failing one gains, and a start where everything
    passes (no failing test to measure in) leaves the shares as they are."""
    start = ProgressPoint(turn=-1, step=-1, tool="start", passed=4, total=6, fraction=4 / 6)
    rep = report("a", "accept", {0: 5 / 6, 1: 4 / 6, 2: 1.0})
    rep = rep.model_copy(update={"progress": [start, *rep.progress]})
    assert progress_rewards(3, rep) == pytest.approx([0.5, -0.5, 1.0])
    full = ProgressPoint(turn=-1, step=-1, tool="start", passed=6, total=6, fraction=1.0)
    broke = report("b", "reject", {0: 5 / 6})
    broke = broke.model_copy(update={"progress": [full, *broke.progress]})
    assert progress_rewards(1, broke) == pytest.approx([-1 / 6])


def test_sft_weights_are_non_negative_with_mean_one():
    w = sft_weights([0.0, -0.3, 1.5, 0.5], floor=0.1)
    assert min(w) >= 0 and sum(w) / len(w) == pytest.approx(1.0)
    assert w[2] > w[3] > w[0] == w[1] == pytest.approx(0.1)
    assert sft_weights([0.0, 0.0], floor=0.1) == [1.0, 1.0]
