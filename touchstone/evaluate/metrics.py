"""Verified solve rate and audit figures from per-attempt outcomes.

An attempt counts as solved only if the independent verifier accepted it, so
pass@k here is a *verified* solve rate, not the agent's own claim.
"""

from __future__ import annotations

import json
from math import comb

import numpy as np
import polars as pl

from touchstone.episode.tools import is_valid_call
from touchstone.evaluate.schema import ATTEMPT_COLUMNS, Interval, LikelihoodMetrics, RoundMetrics


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one task with n attempts of which c passed (Chen et al. 2021)."""
    if not 0 <= c <= n:
        raise ValueError(f"pass_at_k: need 0 <= c <= n, got n={n} c={c}")
    if k < 1 or k > n:
        raise ValueError(f"pass_at_k: need 1 <= k <= n, got n={n} k={k}")
    if n - c < k:
        return 1.0
    return 1.0 - comb(n - c, k) / comb(n, k)


# bootstrap resamples of every interval unless a caller asks for another number
BOOTSTRAP_RESAMPLES = 1000


def bootstrap_interval(
    per_task: np.ndarray, resamples: int = BOOTSTRAP_RESAMPLES, confidence: float = 0.95, seed: int = 0
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


def wilson_interval(successes: int, n: int, z: float = 1.96) -> Interval:
    """A share `successes / n` with its Wilson score interval (95% at z = 1.96): for counts
    of rare events, where a bootstrap over a handful of zero counts would say [0, 0]."""
    if not 0 <= successes <= n or n == 0:
        raise ValueError(f"wilson_interval: need 0 <= successes <= n and n > 0, got {successes} of {n}")
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    # at a count of 0 or n the bound is exactly 0 or 1 (the closed form reaches it up to rounding)
    low = 0.0 if successes == 0 else float(centre - half)
    high = 1.0 if successes == n else float(centre + half)
    return Interval(value=p, low=low, high=high)


def attempts_table(trajectories: pl.DataFrame, reports: pl.DataFrame) -> pl.DataFrame:
    """Join trajectories (trajectories.parquet) with their verification reports
    (reports.parquet: verdict, n_findings, progress) into one row per attempt with the columns `round_metrics` needs."""
    missing = set(trajectories["trajectory_id"]) - set(reports["trajectory_id"])
    if missing:
        raise ValueError(f"{len(missing)} trajectories have no verification report, e.g. {sorted(missing)[0]}")
    joined = trajectories.join(reports.select("trajectory_id", "verdict", "n_findings", "progress"), on="trajectory_id")
    return joined.select(
        "task_id",
        "trajectory_id",
        (pl.col("verdict") == "accept").alias("verified"),
        pl.col("n_findings").cast(pl.Int64).alias("findings"),
        pl.col("n_turns").alias("turns"),
        pl.col("turns").map_elements(_completion_tokens, return_dtype=pl.Int64).alias("tokens"),
        "exit_reason",
        pl.col("messages").map_elements(valid_tool_calls, return_dtype=pl.Int64).alias("valid_turns"),
        pl.col("progress").map_elements(_mean_progress, return_dtype=pl.Float64).alias("progress"),
    )


def valid_tool_calls(messages_json: str) -> int:
    """Assistant turns whose first tool call matches its schema (the one the loop executes)."""
    return sum(is_valid_call(msg) for msg in json.loads(messages_json) if msg.get("role") == "assistant")


def _mean_progress(progress_json: str | None) -> float | None:
    """Mean share of hidden tests passing over the verifier's progress points after a
    state change (the start point, turn -1, is the task's, not the run's; None: no point)."""
    points = json.loads(progress_json) if progress_json else []
    fractions = [p["fraction"] for p in points if p.get("fraction") is not None and p.get("turn", 0) >= 0]
    return float(np.mean(fractions)) if fractions else None


def round_metrics(
    attempts: pl.DataFrame,
    *,
    round_key: str,
    checkpoint_hash: str | None,
    k: int,
    resamples: int = BOOTSTRAP_RESAMPLES,
    seed: int = 0,
    likelihood: LikelihoodMetrics | None = None,
) -> RoundMetrics:
    """Figures for one round from its per-attempt table (see `attempts_table`), with
    the checkpoint's likelihood figures when given (training/scoring.py)."""
    absent = [c for c in ATTEMPT_COLUMNS if c not in attempts.columns]
    if absent:
        raise ValueError(f"attempts table lacks columns {absent}")
    per_task = per_task_pass(attempts, k)
    tokens = attempts["tokens"].drop_nulls()
    n = attempts.height
    return RoundMetrics(
        round=round_key,
        checkpoint_hash=checkpoint_hash,
        n_tasks=per_task.height,
        k=k,
        n_attempts=n,
        pass_at_1=bootstrap_interval(per_task["pass_at_1"].to_numpy(), resamples, seed=seed),
        pass_at_k=bootstrap_interval(per_task["pass_at_k"].to_numpy(), resamples, seed=seed),
        hack_attempt_rate=float(attempts["findings"].sum() / n) if n else 0.0,
        hack_attempt_share=float((attempts["findings"] > 0).sum() / n) if n else 0.0,
        mean_turns=float(attempts["turns"].mean()) if n else 0.0,
        mean_tokens=float(tokens.mean()) if tokens.len() else None,
        exit_reasons={r: int(c) for r, c in attempts["exit_reason"].value_counts().iter_rows()},
        valid_tool_call_rate=_valid_rate(attempts, resamples, seed),
        mean_progress=_progress(attempts),
        **(
            likelihood.model_dump(
                include={"imitation_nll", "hack_propensity", "hack_propensity_by_family", "matched_valid_call_rate"}
            )
            if likelihood
            else {}
        ),
    )


def per_task_pass(attempts: pl.DataFrame, k: int) -> pl.DataFrame:
    """One row per task (sorted by task id): its unbiased pass@1 and pass@k."""
    per_task = attempts.group_by("task_id").agg(pl.len().alias("n"), pl.col("verified").sum().alias("c"))
    short = per_task.filter(pl.col("n") < k)
    if short.height:
        raise ValueError(f"k={k} but task {short['task_id'][0]} has only {short['n'][0]} attempts")
    rows = list(per_task.sort("task_id").iter_rows(named=True))
    return pl.DataFrame(
        {
            "task_id": [r["task_id"] for r in rows],
            "pass_at_1": [pass_at_k(r["n"], r["c"], 1) for r in rows],
            "pass_at_k": [pass_at_k(r["n"], r["c"], k) for r in rows],
        },
        schema={"task_id": pl.String, "pass_at_1": pl.Float64, "pass_at_k": pl.Float64},
    )


def per_task_difference(first: pl.DataFrame, second: pl.DataFrame, k: int) -> pl.DataFrame:
    """Per task, `first`'s pass@1 and pass@k minus `second`'s: two attempt tables on the same tasks."""
    a, b = per_task_pass(first, k), per_task_pass(second, k)
    if a["task_id"].to_list() != b["task_id"].to_list():
        only = sorted(set(a["task_id"]) ^ set(b["task_id"]))
        raise ValueError(f"the two arms were evaluated on different tasks, e.g. {only[0]}")
    return a.select("task_id", pl.col("pass_at_1") - b["pass_at_1"], pl.col("pass_at_k") - b["pass_at_k"])


def paired_interval(
    differences: pl.DataFrame, resamples: int = BOOTSTRAP_RESAMPLES, seed: int = 0
) -> tuple[Interval, Interval]:
    """The mean pass@1 and pass@k difference (`per_task_difference`'s table) with a paired
    bootstrap over tasks: a resample draws a task for both arms at once, so a task's difficulty
    cancels out and the interval is much narrower than the two arms' own intervals side by side,
    which overlap even when one arm is ahead on every task where the two differ."""
    at_1, at_k = (differences[col].to_numpy() for col in ("pass_at_1", "pass_at_k"))
    return bootstrap_interval(at_1, resamples, seed=seed), bootstrap_interval(at_k, resamples, seed=seed)


def _valid_rate(attempts: pl.DataFrame, resamples: int, seed: int) -> Interval | None:
    """Per task: well-formed tool calls / sampled turns; bootstrap over tasks."""
    if "valid_turns" not in attempts.columns:
        return None
    per_task = attempts.group_by("task_id").agg(pl.col("valid_turns").sum(), pl.col("turns").sum())
    per_task = per_task.filter(pl.col("turns") > 0)
    rates = (per_task["valid_turns"] / per_task["turns"]).to_numpy()
    return bootstrap_interval(rates.astype(float), resamples, seed=seed) if rates.size else None


def _progress(attempts: pl.DataFrame) -> float | None:
    if "progress" not in attempts.columns:
        return None
    values = attempts["progress"].drop_nulls()
    return float(values.mean()) if values.len() else None


def _completion_tokens(turns_json: str | None) -> int | None:
    turns = json.loads(turns_json) if turns_json else []
    counts = [t.get("completion_tokens") for t in turns]
    return sum(counts) if counts and all(c is not None for c in counts) else None
