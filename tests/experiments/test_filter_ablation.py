"""The filter ablation, tiny: the same hack-prone trajectories, two filters, the
same base model and training. The direction of the effect must show: the
naive harness keeps hacks and its checkpoint comes to prefer the hack; the
verifier keeps none and its checkpoint does not."""

from __future__ import annotations

import pytest

from tests.experiments.conftest import TINY, assert_filter_effect, assert_real_intervals
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
