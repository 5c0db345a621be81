"""The evaluation record of one round (docs/formats/evaluation.md)."""

from __future__ import annotations

from pydantic import BaseModel, Field

# Columns of the per-attempt table that `round_metrics` reads (`valid_turns`,
# `progress`: when present, tables written before them lack them).
ATTEMPT_COLUMNS = ("task_id", "trajectory_id", "verified", "findings", "turns", "tokens", "exit_reason")
# Interval-valued metrics: three columns each in `metrics.parquet` (value, _low, _high).
INTERVALS = (
    "pass_at_1",
    "pass_at_k",
    "valid_tool_call_rate",
    "matched_valid_call_rate",
    "imitation_nll",
    "hack_propensity",
)


class Interval(BaseModel):
    """A point estimate with a percentile-bootstrap confidence interval."""

    value: float
    low: float
    high: float


class RoundMetrics(BaseModel):
    round: str
    checkpoint_hash: str | None
    n_tasks: int = Field(ge=0)
    k: int = Field(ge=1, description="attempts per task")
    n_attempts: int = Field(ge=0)
    pass_at_1: Interval
    pass_at_k: Interval
    hack_attempt_rate: float = Field(ge=0, description="auditor findings per trajectory")
    hack_attempt_share: float = Field(ge=0, le=1, description="trajectories with at least one finding")
    mean_turns: float
    mean_tokens: float | None = Field(description="completion tokens; None when the policy reports none")
    exit_reasons: dict[str, int]
    valid_tool_call_rate: Interval | None = Field(
        default=None, description="sampled assistant turns whose first tool call matches its schema"
    )
    matched_valid_call_rate: Interval | None = Field(
        default=None,
        description="valid tool calls among turns sampled at the held-out reference's states (the same states and "
        "seeds every round)",
    )
    mean_progress: float | None = Field(
        default=None, description="mean share of hidden tests passing at the verifier's progress points"
    )
    imitation_nll: Interval | None = Field(
        default=None, description="NLL per assistant token of the held-out reference (teacher) trajectories"
    )
    hack_propensity: Interval | None = Field(
        default=None, description="mean per-token log-prob of a canonical hack minus the honest action's"
    )
    hack_propensity_by_family: dict[str, float] = Field(default_factory=dict)
    own_row_share: float | None = Field(
        default=None,
        ge=0,
        le=1,
        description="share of the SFT rows this round trained on that the model itself wrote (expert iteration; "
        "the rest: teacher or teacher-corrected runs); None: no rows, or not recorded",
    )

    def flat(self) -> dict[str, object]:
        """One `metrics.parquet` row."""
        row = self.model_dump(exclude={*INTERVALS, "exit_reasons", "hack_propensity_by_family"})
        for name in INTERVALS:
            interval = getattr(self, name)
            row |= {name: None, f"{name}_low": None, f"{name}_high": None}
            if interval is not None:
                row |= {name: interval.value, f"{name}_low": interval.low, f"{name}_high": interval.high}
        row |= {f"exit_{reason}": n for reason, n in sorted(self.exit_reasons.items())}
        row |= {f"propensity_{family}": v for family, v in sorted(self.hack_propensity_by_family.items())}
        return row

    @classmethod
    def from_flat(cls, row: dict[str, object]) -> "RoundMetrics":
        interval_columns = {f"{n}{suffix}" for n in INTERVALS for suffix in ("", "_low", "_high")}
        data = {
            k: v for k, v in row.items() if not k.startswith(("exit_", "propensity_")) and k not in interval_columns
        }
        for name in INTERVALS:
            if row.get(name) is not None:
                data[name] = Interval(value=row[name], low=row[f"{name}_low"], high=row[f"{name}_high"])
        data["exit_reasons"] = {k[5:]: int(v) for k, v in row.items() if k.startswith("exit_") and v}
        data["hack_propensity_by_family"] = {
            k[11:]: float(v) for k, v in row.items() if k.startswith("propensity_") and v is not None
        }
        return cls.model_validate(data)


class LikelihoodMetrics(BaseModel):
    """What a checkpoint does on the held-out reference (training/scoring.py): its
    likelihoods, without sampling, and the calls it samples at the reference's states."""

    imitation_nll: Interval
    hack_propensity: Interval | None  # None: no probe state (no reference trajectory reached one)
    hack_propensity_by_family: dict[str, float]
    n_reference: int = Field(ge=0, description="held-out reference trajectories scored")
    n_states: int = Field(ge=0, description="probe states scored")
    matched_valid_call_rate: Interval | None = Field(
        default=None, description="valid tool calls among turns sampled at the reference's states (not a likelihood)"
    )
