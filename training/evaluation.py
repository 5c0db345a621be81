"""Evaluate any checkpoint on any held-out task set, outside a round (`touchstone
eval`, the filter-ablation and credit-study arms): k sampled attempts per task,
then the round engine's evaluation stage (training.round_engine.evaluate), the
one the round's `round_evaluation` asset calls: graded by the verifier
(pass@1/pass@k, hack attempts, valid tool calls, exit reasons, progress) plus
the likelihood metrics of training/scoring.py on the cached reference set."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from touchstone.agent.loop import EpisodeLimits
from touchstone.agent.policies.spec import PolicySpec
from touchstone.episode.trajectory import Sampling
from touchstone.evaluate.metrics import BOOTSTRAP_RESAMPLES
from touchstone.evaluate.reference import MATCHED_SAMPLES
from touchstone.evaluate.schema import RoundMetrics
from touchstone.tasks.schema import Task
from training.round_engine import SINGLE_RUN, Sandboxes, evaluate, roll_out


def evaluate_checkpoint(
    checkpoint: str | Path,
    tasks: list[Task],
    out: Path,
    *,
    label: str,
    attempts: int = 2,
    backend: str = "auto",
    workers: int = 1,
    sampling: Sampling | None = None,
    limits: EpisodeLimits | None = None,
    resamples: int = BOOTSTRAP_RESAMPLES,
    matched_samples: int = MATCHED_SAMPLES,
    likelihood: bool = True,
) -> RoundMetrics:
    """All evaluation figures of `checkpoint` on `tasks`, labelled `label` (a
    round key or any name); rollouts, reports and OUT/metrics.parquet are kept under `out`.
    `likelihood` False: the sampled figures only (no reference set, no scoring)."""
    sandboxes = Sandboxes(backend=backend, workers=workers)
    spec = PolicySpec("hf", str(checkpoint))
    rollouts = roll_out(tasks, spec, attempts, out / "rollouts", sandboxes, sampling=sampling, limits=limits)
    metrics = evaluate(
        checkpoint,
        tasks,
        rollouts,
        out,
        sandboxes,
        SINGLE_RUN,
        label=label,
        k=attempts,
        resamples=resamples,
        matched_samples=matched_samples,
        sampling=sampling,
        likelihood=likelihood,
    )
    pl.DataFrame([metrics.flat()]).write_parquet(out / "metrics.parquet")
    return metrics
