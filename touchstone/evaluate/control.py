"""The control arm of expert iteration: the loop's checkpoint against the base trained for
the same number of steps on round 0's verified data alone. What the rounds add beyond more
steps on the first round's data is the loop's own gain, measured per task: both arms answer the
same held-out tasks, so the verdict is the paired difference's interval (a resample draws a task
for both arms), not whether the two arms' own intervals overlap."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

import polars as pl

from touchstone.evaluate.metrics import BOOTSTRAP_RESAMPLES, paired_interval, per_task_difference
from touchstone.evaluate.promotion import compare, compare_difference
from touchstone.evaluate.report import interval_text
from touchstone.evaluate.schema import Interval, RoundMetrics

VERDICTS = {1: "above", 0: "within", -1: "below"}


class ControlComparison(BaseModel):
    """A round's checkpoint (the loop) against its control arm on the same held-out tasks."""

    round: str
    steps: int  # optimizer steps each arm had in all from the base
    data_round: str  # whose verified rows the control trained on
    k: int
    loop_pass_at_1: Interval
    control_pass_at_1: Interval
    loop_pass_at_k: Interval
    control_pass_at_k: Interval
    difference_at_1: Interval  # loop minus control, paired bootstrap over tasks
    difference_at_k: Interval
    verdict: Literal["above", "within", "below"]  # difference_at_k's interval against 0
    interval_verdict: Literal["above", "within", "below"]  # the loop's pass@k interval against the control's

    def markdown(self) -> str:
        k = self.k
        return "\n".join(
            [
                f"# Round {self.round} against its control arm",
                "",
                f"Both arms had {self.steps} optimizer steps from the base; the control trained on round "
                f"{self.data_round}'s verified rows alone. Held-out, {k} attempts per task, 95% bootstrap "
                "intervals over tasks.",
                "",
                f"| arm | pass@1 | pass@{k} |",
                "| --- | --- | --- |",
                f"| loop ({self.round}) | {interval_text(self.loop_pass_at_1)} | {interval_text(self.loop_pass_at_k)} |",
                f"| control | {interval_text(self.control_pass_at_1)} | {interval_text(self.control_pass_at_k)} |",
                f"| loop minus control, paired | {interval_text(self.difference_at_1)} "
                f"| {interval_text(self.difference_at_k)} |",
                "",
                f"The loop's pass@{k} is **{self.verdict}** the control's: "
                + {
                    "above": "the paired difference's interval lies above 0.",
                    "below": "the paired difference's interval lies below 0.",
                    "within": "the paired difference's interval holds 0, no gain of the loop shown.",
                }[self.verdict]
                + f" Side by side, the arms' own pass@{k} intervals say `{self.interval_verdict}`.",
                "",
            ]
        )


def compare_to_control(
    loop: RoundMetrics,
    control: RoundMetrics,
    steps: int,
    data_round: str,
    loop_attempts: pl.DataFrame,
    control_attempts: pl.DataFrame,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> ControlComparison:
    """The two arms' figures and attempt tables (`attempts_table`) on the same held-out tasks."""
    if (loop.n_tasks, loop.k) != (control.n_tasks, control.k):
        raise ValueError(
            f"the arms were evaluated differently: loop {loop.n_tasks} tasks x {loop.k}, "
            f"control {control.n_tasks} x {control.k}"
        )
    at_1, at_k = paired_interval(per_task_difference(loop_attempts, control_attempts, loop.k), resamples)
    return ControlComparison(
        round=loop.round,
        steps=steps,
        data_round=data_round,
        k=loop.k,
        loop_pass_at_1=loop.pass_at_1,
        control_pass_at_1=control.pass_at_1,
        loop_pass_at_k=loop.pass_at_k,
        control_pass_at_k=control.pass_at_k,
        difference_at_1=at_1,
        difference_at_k=at_k,
        verdict=VERDICTS[compare_difference(at_k)],
        interval_verdict=VERDICTS[compare(loop.pass_at_k, control.pass_at_k)],
    )
