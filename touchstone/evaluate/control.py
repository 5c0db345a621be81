"""The control arm of expert iteration: the loop's checkpoint against the base trained for
the same number of steps on round 0's verified data alone. What the rounds add beyond more
steps on the first round's data is the loop's own gain; overlapping intervals show none."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel

from touchstone.evaluate.promotion import compare
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
    verdict: Literal["above", "within", "below"]  # the loop's pass@k against the control's interval

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
                "",
                f"The loop's pass@{k} is **{self.verdict}** the control's"
                + (" interval." if self.verdict != "within" else ": the intervals overlap, no gain of the loop shown."),
                "",
            ]
        )


def compare_to_control(loop: RoundMetrics, control: RoundMetrics, steps: int, data_round: str) -> ControlComparison:
    if (loop.n_tasks, loop.k) != (control.n_tasks, control.k):
        raise ValueError(
            f"the arms were evaluated differently: loop {loop.n_tasks} tasks x {loop.k}, "
            f"control {control.n_tasks} x {control.k}"
        )
    return ControlComparison(
        round=loop.round,
        steps=steps,
        data_round=data_round,
        k=loop.k,
        loop_pass_at_1=loop.pass_at_1,
        control_pass_at_1=control.pass_at_1,
        loop_pass_at_k=loop.pass_at_k,
        control_pass_at_k=control.pass_at_k,
        verdict=VERDICTS[compare(loop.pass_at_k, control.pass_at_k)],
    )
