"""Verified solve rate and audit figures from per-attempt outcomes.

An attempt counts as solved only if the independent verifier accepted it, so
pass@k here is a *verified* solve rate, not the agent's own claim.
"""

from __future__ import annotations

import json
from math import comb

import numpy as np
import polars as pl

from touchstone.evaluate.schema import ATTEMPT_COLUMNS, Interval, RoundMetrics


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task with n attempts of which c passed (Chen et al. 2021)."""
    if not 0 <= c <= n:
        raise ValueError(f"pass_at_k: need 0 <= c <= n, got n={n} c={c}")
    if k < 1 or k > n:
        raise ValueError(f"pass_at_k: need 1 <= k <= n, got n={n} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


def bootstrap_interval(
    per_task: np.ndarray, resamples: int = 1000, confidence: float = 0.95, seed: int = 0
) -> Interval:
    """Mean of per-task values with a percentile bootstrap over tasks."""
    if per_task.size == 0:
        return Interval(value=0.0, low=0.0, high=0.0)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, per_task.size, size=(resamples, per_task.size))
    means = per_task[idx].mean(axis=1)
    tail = (1 - confidence) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return Interval(value=float(per_task.mean()), low=float(low), high=float(high))


def attempts_table(trajectories: pl.DataFrame, reports: pl.DataFrame) -> pl.DataFrame:
    """Join trajectories (trajectories.parquet) with their verification reports
    (reports.parquet: verdict, n_findings) into one row per attempt with the columns `round_metrics` needs."""
    missing = set(trajectories["trajectory_id"]) - set(reports["trajectory_id"])
    if missing:
        raise ValueError(f"{len(missing)} trajectories have no verification report, e.g. {sorted(missing)[0]}")
    joined = trajectories.join(reports.select("trajectory_id", "verdict", "n_findings"), on="trajectory_id")
    return joined.select(
        "task_id",
        "trajectory_id",
        (pl.col("verdict") == "accept").alias("verified"),
        pl.col("n_findings").cast(pl.Int64).alias("findings"),
        pl.col("n_turns").alias("turns"),
        pl.col("turns").map_elements(_completion_tokens, return_dtype=pl.Int64).alias("tokens"),
        "exit_reason",
    )


def round_metrics(
    attempts: pl.DataFrame,
    *,
    round_key: str,
    checkpoint_hash: str | None,
    k: int,
    resamples: int = 1000,
    seed: int = 0,
) -> RoundMetrics:
    """Figures for one round from its per-attempt table (see `attempts_table`)."""
    absent = [c for c in ATTEMPT_COLUMNS if c not in attempts.columns]
    if absent:
        raise ValueError(f"attempts table lacks columns {absent}")
    per_task = attempts.group_by("task_id").agg(pl.len().alias("n"), pl.col("verified").sum().alias("c"))
    short = per_task.filter(pl.col("n") < k)
    if short.height:
        raise ValueError(f"k={k} but task {short['task_id'][0]} has only {short['n'][0]} attempts")
    rows = list(per_task.iter_rows(named=True))
    p1 = np.array([pass_at_k(r["n"], r["c"], 1) for r in rows])
    pk = np.array([pass_at_k(r["n"], r["c"], k) for r in rows])
    tokens = attempts["tokens"].drop_nulls()
    n = attempts.height
    return RoundMetrics(
        round=round_key,
        checkpoint_hash=checkpoint_hash,
        n_tasks=per_task.height,
        k=k,
        n_attempts=n,
        pass_at_1=bootstrap_interval(p1, resamples, seed=seed),
        pass_at_k=bootstrap_interval(pk, resamples, seed=seed),
        hack_attempt_rate=float(attempts["findings"].sum() / n) if n else 0.0,
        hack_attempt_share=float((attempts["findings"] > 0).sum() / n) if n else 0.0,
        mean_turns=float(attempts["turns"].mean()) if n else 0.0,
        mean_tokens=float(tokens.mean()) if tokens.len() else None,
        exit_reasons={r: int(c) for r, c in attempts["exit_reason"].value_counts().iter_rows()},
    )


def _completion_tokens(turns_json: str | None) -> int | None:
    turns = json.loads(turns_json) if turns_json else []
    counts = [t.get("completion_tokens") for t in turns]
    return sum(counts) if counts and all(c is not None for c in counts) else None
