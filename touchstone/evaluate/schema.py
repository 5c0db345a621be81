"""The evaluation record of one round (docs/formats/evaluation.md)."""

from __future__ import annotations

from pydantic import BaseModel, Field

# Columns of the per-attempt table that `round_metrics` reads.
ATTEMPT_COLUMNS = ("task_id", "trajectory_id", "verified", "findings", "turns", "tokens", "exit_reason")


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

    def flat(self) -> dict[str, object]:
        """One `metrics.parquet` row."""
        row = self.model_dump(exclude={"pass_at_1", "pass_at_k", "exit_reasons"})
        for name in ("pass_at_1", "pass_at_k"):
            interval = getattr(self, name)
            row |= {name: interval.value, f"{name}_low": interval.low, f"{name}_high": interval.high}
        row |= {f"exit_{reason}": n for reason, n in sorted(self.exit_reasons.items())}
        return row

    @classmethod
    def from_flat(cls, row: dict[str, object]) -> "RoundMetrics":
        data = {k: v for k, v in row.items() if not k.startswith("exit_") and k[:7] != "pass_at"}
        for name in ("pass_at_1", "pass_at_k"):
            data[name] = Interval(value=row[name], low=row[f"{name}_low"], high=row[f"{name}_high"])
        data["exit_reasons"] = {k[5:]: int(v) for k, v in row.items() if k.startswith("exit_") and v}
        return cls.model_validate(data)
