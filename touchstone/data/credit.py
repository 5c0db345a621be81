"""Turn-level credit assignment for long trajectories (formula: docs/CREDIT.md).

A trajectory of T assistant turns with terminal outcome R (accept 1, reject 0,
reject with an audit hack -penalty) gets per-turn progress rewards

    r_t = (p_t - p_prev(t)) / (1 - p_start)
                            for state-changing turns (the verifier recorded a
                            progress point p_t: share of hidden tests passing;
                            p before the first one is the start point's share
                            p_start: progress is measured in the tests that
                            failed on the task as given)
    r_t = 0                 otherwise

returns G_t = sum_{k>=t} gamma^(k-t) r_k + R and advantages A_t = G_t - b,
b = mean R over the attempts of the same task (the part of G_t every turn of
every attempt shares). The outcome is not discounted: in a 50-turn success the
first turn still took part in the success. With gamma = 1 and no progress
points, A_t = R - mean R: plain group-relative outcome reward. SFT weights are
a non-negative function of A_t, so detours inside a successful run count less.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field

from touchstone.verify.report import VerificationReport


class CreditConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    gamma: float = Field(0.9, gt=0.0, le=1.0)
    accept_reward: float = 1.0
    reject_reward: float = 0.0
    # Reward of a rejected run the auditor caught hacking is reject_reward - hack_penalty.
    hack_penalty: float = Field(1.0, ge=0.0)
    # SFT weight of a turn with no positive advantage, relative to the mean weight 1.
    sft_weight_floor: float = Field(0.1, ge=0.0, le=1.0)


def is_hack(report: VerificationReport) -> bool:
    """The auditor found a reject-severity rule (tampering, test edits, ...)."""
    return any(f.severity == "reject" for f in report.findings)


def outcome_reward(report: VerificationReport, cfg: CreditConfig) -> float | None:
    """Terminal reward from the verdict; None for inconclusive (no label, dropped)."""
    if report.verdict == "accept":
        return cfg.accept_reward
    if report.verdict == "reject":
        return cfg.reject_reward - (cfg.hack_penalty if is_hack(report) else 0.0)
    return None


def progress_rewards(n_turns: int, report: VerificationReport) -> list[float]:
    """r_t for each of the n_turns assistant turns. Progress is counted from the
    report's start point (the share passing on the task as given: required tests
    include pass-to-pass ones), or from 0 for reports recorded without one, and
    measured in the tests that failed there: a change is scaled by 1 / (1 - p_start),
    so making every failing test pass is worth 1 however many tests already passed
    (as a share of all required tests a fix that turns 1 of 6 earned 1/6, no more
    than the outcome's spread across a group)."""
    rewards = [0.0] * n_turns  # a run that failed before its first turn has none: it only sets the baseline
    previous, scale = 0.0, 1.0
    for point in sorted(report.progress or [], key=lambda p: (p.turn, p.step)):
        if point.is_start:  # what already passed on the task as given is no turn's doing
            previous = point.fraction
            scale = 1.0 / (1.0 - previous) if previous < 1.0 else 1.0
            continue
        if not 0 <= point.turn < n_turns:
            raise ValueError(
                f"report {report.report_id}: progress point at turn {point.turn}, but the trajectory has {n_turns} turns"
            )
        rewards[point.turn] += (point.fraction - previous) * scale
        previous = point.fraction
    return rewards


def turn_returns(rewards: Sequence[float], outcome: float, gamma: float) -> list[float]:
    """G_t = (discounted progress still to come from turn t) + outcome."""
    returns = [0.0] * len(rewards)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        running = rewards[t] + gamma * running
        returns[t] = running + outcome
    return returns


class TurnCredit(BaseModel):
    reward: float  # terminal outcome R
    group_advantage: float  # R - mean R of the task group
    returns: list[float]  # G_t per turn
    advantages: list[float]  # A_t per turn


def credit_group(attempts: Mapping[str, tuple[int, VerificationReport]], cfg: CreditConfig) -> dict[str, TurnCredit]:
    """Credit for the attempts of ONE task: trajectory id -> (assistant turn
    count, report). Inconclusive attempts carry no label and are left out."""
    outcomes = {tid: outcome_reward(rep, cfg) for tid, (_, rep) in attempts.items()}
    labelled = {tid: r for tid, r in outcomes.items() if r is not None}
    if not labelled:
        return {}
    baseline = sum(labelled.values()) / len(labelled)
    credits = {}
    for tid, outcome in labelled.items():
        n_turns, report = attempts[tid]
        returns = turn_returns(progress_rewards(n_turns, report), outcome, cfg.gamma)
        credits[tid] = TurnCredit(
            reward=outcome,
            group_advantage=outcome - baseline,
            returns=returns,
            advantages=[g - baseline for g in returns],
        )
    return credits


def sft_weights(advantages: Sequence[float], floor: float) -> list[float]:
    """Non-negative per-turn SFT weights with mean 1: turns with more positive
    advantage weigh more; turns with A_t <= 0 keep `floor`. When no turn has a
    positive advantage (e.g. every attempt succeeded the same way) all turns
    weigh 1: there is nothing to prefer."""
    positive = [max(a, 0.0) for a in advantages]
    total = sum(positive)
    if total <= 1e-12:
        return [1.0] * len(advantages)
    n = len(advantages)
    return [floor + (1.0 - floor) * p * n / total for p in positive]
