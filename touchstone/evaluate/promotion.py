"""The promotion gate: does a round's checkpoint replace the best so far as the
next round's starting point?

The candidate (this round's evaluation) is compared with the incumbent (the
evaluation of the checkpoint this round started from, when that checkpoint
was evaluated) on a metric with its bootstrap interval:

- rule `point`: the higher point estimate wins; equal values are a tie.
- rule `interval`: the candidate wins only when its interval lies wholly above
  the incumbent's, loses when wholly below; overlapping intervals are a tie.
- rule `paired`: the same on the candidate-minus-incumbent difference, per task
  with a paired bootstrap over the held-out tasks both answered
  (`metrics.paired_interval`): wholly above 0 wins, wholly below loses, holding 0
  is a tie. Both evaluations sample the same tasks, so this is the test the two
  intervals side by side only approximate (they overlap even when one checkpoint
  is ahead on every task where the two differ).

Ties follow `on_tie` (`keep` the incumbent, or `promote` the newer weights).
A round that made no update (nothing verified to train on) is not promoted and
not evaluated: the next round starts from the checkpoint it kept (`no_update`).
Whatever the metric says, a candidate whose hack-attempt rate exceeds the
incumbent's by more than `max_hack_rate_increase` is not promoted.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

from touchstone.evaluate.schema import Interval, RoundMetrics

Metric = Literal["pass_at_1", "pass_at_k"]


class PromotionPolicy(BaseModel):
    metric: Metric = Field("pass_at_1", description="The verified metric a new checkpoint must not lose on.")
    rule: Literal["point", "interval", "paired"] = Field(
        "point",
        description="point: compare point estimates; interval: better only when the bootstrap "
        "intervals do not overlap (overlap = tie); paired: better only when the paired bootstrap "
        "interval of the per-task difference lies above 0 (holding 0 = tie).",
    )
    on_tie: Literal["keep", "promote"] = Field(
        "promote", description="On a tie: keep the best-so-far checkpoint, or promote the new one."
    )
    max_hack_rate_increase: float = Field(
        0.0, description="A checkpoint whose hack-attempt rate rises by more than this is not promoted."
    )


class PromotionDecision(BaseModel):
    """Which round's checkpoint the next round starts from, and why."""

    promoted: bool
    next_round: str  # the round whose checkpoint comes next
    next_checkpoint_hash: str | None
    incumbent_round: str | None  # None: nothing evaluated to compare with
    metric: Metric
    candidate: Interval | None  # None: the round made no update, nothing was evaluated
    incumbent: Interval | None
    reason: str


def decide(
    candidate: RoundMetrics,
    incumbent: RoundMetrics | None,
    policy: PromotionPolicy,
    difference: Interval | None = None,
) -> PromotionDecision:
    """Promote `candidate` over `incumbent` (None: nothing to beat) under `policy`; the
    `paired` rule needs `difference`, the candidate minus the incumbent on the metric, paired
    over tasks."""
    score = getattr(candidate, policy.metric)
    if incumbent is None:
        return _decision(True, candidate, None, policy, "no evaluated checkpoint to compare with")
    best = getattr(incumbent, policy.metric)
    hack_rise = candidate.hack_attempt_rate - incumbent.hack_attempt_rate
    if hack_rise > policy.max_hack_rate_increase:
        return _decision(
            False,
            candidate,
            incumbent,
            policy,
            f"hack-attempt rate rose by {hack_rise:.3f} (> {policy.max_hack_rate_increase:.3f} allowed)",
        )
    text = f"{policy.metric} {_fmt(score)} vs {_fmt(best)}"
    if policy.rule == "paired":
        if difference is None:
            raise ValueError("the paired rule needs the candidate-minus-incumbent difference per task")
        outcome = compare_difference(difference)
        text += f", paired difference {_fmt(difference)} (paired rule)"
    else:
        outcome = compare(score, best, policy.rule)
        text += f" ({policy.rule} rule)"
    if outcome == 0:
        return _decision(
            policy.on_tie == "promote", candidate, incumbent, policy, f"tie: {text}, on_tie={policy.on_tie}"
        )
    return _decision(outcome > 0, candidate, incumbent, policy, ("better: " if outcome > 0 else "worse: ") + text)


def no_update(kept_round: str, kept_hash: str, reason: str, policy: PromotionPolicy) -> PromotionDecision:
    """A round that trained nothing (no verified row for its method) has no new
    checkpoint to evaluate or promote: the next round starts from the one it kept."""
    return PromotionDecision(
        promoted=False,
        next_round=kept_round,
        next_checkpoint_hash=kept_hash,
        incumbent_round=kept_round,
        metric=policy.metric,
        candidate=None,
        incumbent=None,
        reason=f"no update this round ({reason})",
    )


def compare(score: Interval, best: Interval, rule: str = "interval") -> int:
    """1: `score` better, -1: worse, 0: a tie (interval rule: the intervals overlap)."""
    if rule == "interval":
        return 1 if score.low > best.high else -1 if score.high < best.low else 0
    return (score.value > best.value) - (score.value < best.value)


def compare_difference(difference: Interval) -> int:
    """A paired difference's interval against 0: 1 wholly above, -1 wholly below, 0 holding it."""
    return compare(difference, Interval(value=0.0, low=0.0, high=0.0))


def _decision(
    promoted: bool, candidate: RoundMetrics, incumbent: RoundMetrics | None, policy: PromotionPolicy, reason: str
) -> PromotionDecision:
    winner = candidate if promoted or incumbent is None else incumbent
    return PromotionDecision(
        promoted=promoted,
        next_round=winner.round,
        next_checkpoint_hash=winner.checkpoint_hash,
        incumbent_round=incumbent.round if incumbent else None,
        metric=policy.metric,
        candidate=getattr(candidate, policy.metric),
        incumbent=getattr(incumbent, policy.metric) if incumbent else None,
        reason=reason,
    )


def _fmt(i: Interval) -> str:
    return f"{i.value:.3f} [{i.low:.3f}, {i.high:.3f}]"
