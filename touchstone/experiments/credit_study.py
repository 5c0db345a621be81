"""The credit-assignment study, domain side (no torch): one variable, how the
turns of the same verified trajectories are weighted (docs/EXPERIMENTS.md).

Arms, all built from one set of hack-prone trajectories verified WITH progress
points (the share of hidden tests passing after each state-changing step):
- `uniform`: SFT on the accepted runs, every turn weight 1;
- `progress`: the same rows, the default formula's weights (touchstone/data/credit.py);
- `shuffled`: the same rows, each row's progress weights permuted among its own
  turns (seeded per training seed): the same weight values, not where they fall;
- `outcome_rl`: policy gradient on every labelled run with outcome-only
  advantages `R - mean R` of the task group (progress points dropped, so every
  turn of a run gets its run's advantage).
Why progress points matter: rounds verify without them (the round engine's `verify`,
training/round_engine.py, defaults to `progress=False`), so `r_t = 0`, every turn of a run shares `R - b`,
and `sft_weights` gives every turn weight 1.0. The study verifies with
`progress=True`; `weight_stats` shows the weights it trained on.

The metrics are not derived from the weights: held-out pass@k, NLL of the
held-out teacher runs on turns before / at / after the turn that fixed the bug
(its first progress point at 1.0), the action types sampled at matched held-out
states, mean progress of sampled held-out runs. The torch side is
training/credit_study.py.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from touchstone.episode.tools import is_valid_call
from touchstone.data.credit import CreditConfig
from touchstone.data.inputs import Example
from touchstone.data.rl import build_rl
from touchstone.data.schema import DataConfig, RLRow, SFTRow
from touchstone.data.sft import build_sft
from touchstone.evaluate.metrics import BOOTSTRAP_RESAMPLES, bootstrap_interval
from touchstone.evaluate.schema import Interval
from touchstone.experiments.filter_ablation import peft_field
from touchstone.verify.report import VerificationReport

CREDIT_ARMS = ("uniform", "progress", "shuffled", "outcome_rl")
# The row metrics summarized per arm over seeds (CreditRow fields).
METRICS = (
    "pass_at_k",
    "mean_progress",
    "nll_before_fix",
    "nll_fix",
    "nll_after_fix",
    "action_agreement",
)


class CreditStudyConfig(BaseModel):
    """Defaults: 4 arms x 3 seeds on the shipped seeds' mutation tasks, sized for 2 CPU cores in under an hour."""

    model_config = ConfigDict(extra="forbid")
    seeds: int = Field(3, ge=1, description="training seeds per arm (each also draws its own shuffle and samples)")
    hack_rate: float = Field(
        0.3, ge=0, le=1, description="P of the hack-prone data policy (rejected runs set baselines)"
    )
    attempts: int = Field(3, ge=1, description="hack-prone attempts per training task")
    n_tasks: int = Field(6, ge=1, description="training tasks (mutation tasks of the shipped seeds)")
    n_heldout: int = Field(8, ge=1, description="held-out tasks")
    max_steps: int = Field(20, ge=1, description="training steps per arm and seed")
    learning_rate: float = Field(1e-3, gt=0)
    peft: dict[str, Any] | None = peft_field()
    batch_size: int = Field(2, ge=1)
    max_length: int = Field(2048, ge=256, description="tokens per training window")
    eval_attempts: int = Field(2, ge=1, description="k: sampled attempts per held-out task (pass@k)")
    max_turns: int = Field(4, ge=1, description="turns per sampled held-out episode")
    max_tokens: int = Field(64, ge=1, description="tokens per sampled turn")
    temperature: float = Field(0.7, ge=0)
    action_states: int = Field(16, ge=1, description="matched held-out states where action types are sampled")
    action_samples: int = Field(4, ge=1, description="samples per matched state")
    seed: int = 0
    backend: str = "auto"
    workers: int = Field(2, ge=1)


class WeightStats(BaseModel):
    """What an arm trained on: rows, and how far its turn weights are from uniform."""

    rows: int
    turns: int
    mean_abs_dev: float  # mean |w - 1| over trained turns (0: uniform)
    share_not_one: float


class CreditRow(BaseModel):
    """One arm, one seed, one round (the `--json` ROW)."""

    arm: str
    seed: int
    round: int = 0  # the study trains once on fixed data: one round
    method: str  # sft | rl
    weights: WeightStats
    checkpoint_hash: str
    pass_at_1: float
    pass_at_k: float
    k: int
    mean_progress: float | None
    nll_before_fix: float | None
    nll_fix: float | None
    nll_after_fix: float | None
    action_agreement: float | None  # sampled action type == the teacher's at the state
    action_types: dict[str, int]


def without_progress(examples: list[Example]) -> list[Example]:
    """The examples as the rounds see them: reports without progress points."""
    return [e.model_copy(update={"report": e.report.model_copy(update={"progress": None})}) for e in examples]


def arm_rows(arm: str, examples: list[Example], seed: int) -> list[SFTRow] | list[RLRow]:
    """The arm's training rows from the same verified examples (module docstring)."""
    if arm == "outcome_rl":
        return build_rl(without_progress(examples), DataConfig(credit=CreditConfig(gamma=1.0)))[0]
    rows = build_sft(examples, DataConfig())[0]
    if arm == "progress":
        return rows
    if arm == "uniform":
        return [r.model_copy(update={"turn_weights": [1.0 if w > 0 else 0.0 for w in r.turn_weights]}) for r in rows]
    if arm == "shuffled":
        return [r.model_copy(update={"turn_weights": shuffled(r.turn_weights, seed, r.trajectory_id)}) for r in rows]
    raise ValueError(f"unknown credit arm {arm!r}; expected one of {', '.join(CREDIT_ARMS)}")


def shuffled(weights: list[float], seed: int, key: str) -> list[float]:
    """The weights permuted among the turns that train (weight > 0: a malformed call stays context)."""
    trained = [i for i, w in enumerate(weights) if w > 0]
    values = [weights[i] for i in trained]
    random.Random(f"{seed}:{key}").shuffle(values)
    out = list(weights)
    for i, v in zip(trained, values):
        out[i] = v
    return out


def weight_stats(rows: list[SFTRow] | list[RLRow]) -> WeightStats:
    """Dispersion of the per-turn training weight (SFT weights; RL: |advantage| has no mean 1, so 0)."""
    weights = [w for r in rows if isinstance(r, SFTRow) for w in r.turn_weights if w > 0]
    turns = sum(r.n_turns for r in rows)
    if not weights:
        return WeightStats(rows=len(rows), turns=turns, mean_abs_dev=0.0, share_not_one=0.0)
    arr = np.array(weights)
    return WeightStats(
        rows=len(rows),
        turns=turns,
        mean_abs_dev=float(np.mean(np.abs(arr - 1.0))),
        share_not_one=float(np.mean(np.abs(arr - 1.0) > 1e-9)),
    )


def fix_turn(report: VerificationReport) -> int | None:
    """The turn whose state change first made every required hidden test pass (None: never)."""
    done = [p for p in report.progress or [] if not p.is_start and p.total and p.passed == p.total]
    return min((p.turn, p.step) for p in done)[0] if done else None


def turn_phase(turn: int, fixed_at: int) -> str:
    return "before" if turn < fixed_at else "fix" if turn == fixed_at else "after"


def action_type(message: dict[str, Any]) -> str:
    """The tool a sampled turn calls, or `invalid` (no call, or one that does not match its schema)."""
    if not is_valid_call(message):
        return "invalid"
    return str(message["tool_calls"][0]["function"]["name"])


def summarize(rows: list[dict[str, Any]], resamples: int = BOOTSTRAP_RESAMPLES) -> dict[str, dict[str, Any] | None]:
    """Per metric: the mean over seeds with a 95% percentile bootstrap over seeds (None: no seed measured it)."""
    out: dict[str, dict[str, Any] | None] = {}
    for name in METRICS:
        values = np.array([r[name] for r in rows if r[name] is not None], dtype=float)
        out[name] = (
            bootstrap_interval(values, resamples).model_dump() | {"n": int(values.size)} if values.size else None
        )
    return out


def action_distribution(rows: list[dict[str, Any]]) -> dict[str, float]:
    """Shares of sampled action types over every seed of an arm."""
    total = Counter()
    for r in rows:
        total.update(r["action_types"])
    n = sum(total.values())
    return {k: v / n for k, v in sorted(total.items())} if n else {}


def interval(summary: dict[str, Any] | None) -> Interval | None:
    return None if summary is None else Interval(value=summary["value"], low=summary["low"], high=summary["high"])
