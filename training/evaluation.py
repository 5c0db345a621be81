"""Evaluate any checkpoint on any held-out task set, outside a round (`touchstone
eval`, the filter-ablation experiment): k sampled attempts per task graded by
the verifier (pass@1/pass@k, hack attempts, valid tool calls, exit reasons,
progress) plus the likelihood metrics of training/scoring.py on the cached
reference set. The round's `round_evaluation` asset computes the same figures
with its own rollout resources."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from touchstone.agent.loop import EpisodeLimits
from touchstone.agent.policies.spec import PolicySpec
from touchstone.agent.rollout import solve
from touchstone.episode.trajectory import Sampling
from touchstone.checkpoint import checkpoint_hash
from touchstone.evaluate import attempts_table, round_metrics
from touchstone.evaluate.metrics import BOOTSTRAP_RESAMPLES
from touchstone.evaluate.reference import MATCHED_SAMPLES, probe_states, read_reference, reference_set, turn_states
from touchstone.evaluate.schema import LikelihoodMetrics, RoundMetrics
from touchstone.tasks.schema import Task
from touchstone.verify import verify_batch
from training.scoring import MAX_LENGTH, likelihood_metrics, matched_valid_calls


def checkpoint_likelihood(
    checkpoint: str | Path,
    tasks: list[Task],
    *,
    backend: str = "auto",
    workers: int = 1,
    resamples: int = BOOTSTRAP_RESAMPLES,
    matched_samples: int = MATCHED_SAMPLES,
    sampling: Sampling | None = None,
) -> LikelihoodMetrics | None:
    """Imitation NLL, hack propensity and the valid tool-call rate at matched states
    (`matched_samples` at each turn state of the teacher's runs, accepted or not; 0: not
    measured) on the (cached) reference set of `tasks`; None when the teacher solved
    none of them (nothing to score against)."""
    runs = read_reference(reference_set(tasks, backend=backend, workers=workers), accepted_only=False)
    reference = [r for r in runs if r["accepted"]]
    if not reference:
        return None
    # scored within the window the policy acts in (its prompts keep their latest tokens)
    window = sampling.context_window if sampling and sampling.context_window else MAX_LENGTH
    metrics = likelihood_metrics(checkpoint, reference, probe_states(reference), max_length=window, resamples=resamples)
    matched = matched_valid_calls(
        checkpoint,
        turn_states(runs),
        samples=matched_samples,
        sampling=sampling or Sampling(),
        resamples=resamples,
    )
    return metrics.model_copy(update={"matched_valid_call_rate": matched})


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
    round key or any name); rollouts and reports are kept under `out`.
    `likelihood` False: the sampled figures only (no reference set, no scoring)."""
    solve(
        tasks,
        PolicySpec("hf", str(checkpoint)),
        attempts,
        workers,
        out / "rollouts",
        sampling,
        backend,
        limits,
        progress=False,
    )
    verify_batch(
        [t.dir for t in tasks],
        out / "rollouts",
        workers=workers,
        out=out / "verification",
        backend=backend,
        replays=1,
        progress=True,
        progress_bar=False,
    )
    table = attempts_table(
        pl.read_parquet(out / "rollouts" / "trajectories.parquet"),
        pl.read_parquet(out / "verification" / "reports.parquet"),
    )
    table.write_parquet(out / "attempts.parquet")
    broken = table.filter(pl.col("exit_reason") == "sandbox_error")
    if broken.height:  # the sandbox failed, not the model: no figure to report
        raise RuntimeError(f"{broken.height} attempt(s) of {label} ended in a sandbox error; see {out / 'rollouts'}")
    scored = None
    if likelihood:
        scored = checkpoint_likelihood(
            checkpoint,
            tasks,
            backend=backend,
            workers=workers,
            resamples=resamples,
            matched_samples=matched_samples,
            sampling=sampling,
        )
    metrics = round_metrics(
        table,
        round_key=label,
        checkpoint_hash=checkpoint_hash(str(checkpoint)),
        k=attempts,
        resamples=resamples,
        likelihood=scored,
    )
    pl.DataFrame([metrics.flat()]).write_parquet(out / "metrics.parquet")
    return metrics
