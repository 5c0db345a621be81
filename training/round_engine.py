"""The round engine: one round's stages as plain functions, the one place a round
is assembled from. propose tasks → roll out → verify and audit → build training
data → train → evaluate.

The round's assets (`assets/`) are thin wrappers over these; the warm start
(training/warm_start.py), the filter-ablation arms (training/ablation.py), the
credit study (training/credit_study.py) and `touchstone eval`
(training/evaluation.py) call the very same functions with their own settings,
so how a stage runs is decided here once. Settings cross a stage boundary as
typed records: `Sandboxes` (where and how many) and `Grading` (the verifier); a round's
resources make them from its run config (`orchestration/resources.py`).

Two stages need no settings of the engine's and are called directly by every
caller: building training data is `touchstone.data.build.build_datasets`, and
training is `training.train.train` (the round's `checkpoint` asset runs it under
Dagster Pipes, `training.pipes`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from touchstone.agent.loop import EpisodeLimits
from touchstone.agent.policies.spec import PolicySpec
from touchstone.agent.rollout import solve
from touchstone.checkpoint import checkpoint_hash
from touchstone.episode.trajectory import Sampling
from touchstone.evaluate.metrics import BOOTSTRAP_RESAMPLES
from touchstone.evaluate import attempts_table, round_metrics
from touchstone.evaluate.reference import MATCHED_SAMPLES
from touchstone.evaluate.schema import RoundMetrics
from touchstone.sandbox import DEFAULT_BACKEND
from touchstone.taskmaking.contamination import round_sets
from touchstone.taskmaking.sources import RoundSources, SourceMix, propose_round
from touchstone.taskmaking.validate import ValidationConfig
from touchstone.tasks.schema import Task
from touchstone.verify import verify_batch
from touchstone.verify.report import DEFAULT_REPLAYS

Log = Callable[[str], None]


@dataclass(frozen=True)
class Sandboxes:
    """The sandboxes a stage runs its work in: which backend, and how many at once."""

    backend: str = DEFAULT_BACKEND
    workers: int = 1


@dataclass(frozen=True)
class Grading:
    """How the verifier grades a stage's trajectories: fresh-sandbox grading runs per
    trajectory, and the audit rules waived (that weakens the filter: a round's canary
    check exists to catch it)."""

    replays: int = DEFAULT_REPLAYS
    allow_rules: frozenset[str] = frozenset()


# Outside a round (`touchstone eval`, the experiments' arms): one grading run per trajectory.
# They compare checkpoints or filters on the very same runs (the filter ablation's held-out
# check, not replays, is its ground truth for a flaky pass), and a round's flakiness guard
# would multiply their cost.
SINGLE_RUN = Grading(replays=1)


def propose(
    out: Path,
    mix: SourceMix,
    sandboxes: Sandboxes,
    *,
    seeds: list | None,
    heldout: Path | None,
    rng_seed: int,
    contamination_sets: Iterable[str | Path] = (),
    policy=None,
    history: list[Path] | None = None,
    round_key: str | None = None,
) -> RoundSources:
    """Tasks from `mix`'s sources validated into `out` under grading's conditions
    (touchstone.taskmaking.sources.propose_round), apart from the `heldout` set: a
    task sharing a source unit with it is excluded, a disguised copy of a held-out
    task or of a benchmark in `contamination_sets` rejected as contaminated."""
    validation = ValidationConfig(backend=sandboxes.backend, contamination_sets=round_sets(heldout, contamination_sets))
    return propose_round(
        out,
        mix,
        seeds=seeds,
        heldout=heldout,
        policy=policy,
        history=history,
        validation=validation,
        workers=sandboxes.workers,
        rng_seed=rng_seed,
        round_key=round_key,
    )


def roll_out(
    tasks: list[Task],
    spec: PolicySpec,
    attempts: int,
    out: Path,
    sandboxes: Sandboxes,
    *,
    sampling: Sampling | None = None,
    limits: EpisodeLimits | None = None,
    progress: bool = False,
    log: Log | None = None,
) -> Path:
    """`attempts` episodes of `spec` on every task into `out` (touchstone.agent.rollout.solve:
    it resumes into `out`, redoing only unfinished attempts). None settings: the library's."""
    if log:
        log(f"rolling out {spec} on {len(tasks)} tasks x {attempts} attempts into {out}")
    return solve(tasks, spec, attempts, sandboxes.workers, out, sampling, sandboxes.backend, limits, progress=progress)


def verify(
    tasks: Path | list[Task],
    trajectories: Path,
    out: Path,
    sandboxes: Sandboxes,
    grading: Grading = Grading(),
    *,
    progress: bool = False,
    revoked: Iterable = (),
    progress_bar: bool = True,
) -> Path:
    """A report for every trajectory in `trajectories` (OUT/reports.parquet, checks.parquet,
    findings.parquet; touchstone.verify.verify_batch). `tasks`: a task-set directory or the
    tasks; `progress`: with the share of hidden tests passing after each state-changing step;
    `revoked`: the round's revocations (their trajectories are reported against a revoked task)."""
    return verify_batch(
        tasks if isinstance(tasks, Path) else [t.dir for t in tasks],
        trajectories,
        workers=sandboxes.workers,
        out=out,
        replays=grading.replays,
        backend=sandboxes.backend,
        allow_rules=set(grading.allow_rules),
        progress=progress,
        revoked={r.task_id: f"{r.reason}: {r.evidence}" for r in revoked},
        progress_bar=progress_bar,
    )


def evaluate(
    checkpoint: str | Path,
    tasks: list[Task],
    rollouts: Path,
    out: Path,
    sandboxes: Sandboxes,
    grading: Grading,
    *,
    label: str,
    k: int,
    resamples: int = BOOTSTRAP_RESAMPLES,
    matched_samples: int = MATCHED_SAMPLES,
    sampling: Sampling | None = None,
    likelihood: bool = True,
) -> RoundMetrics:
    """The evaluation figures of `checkpoint` labelled `label` (a round key or any name):
    its `k` sampled attempts per held-out task in `rollouts`, verified with progress points
    into OUT/verification and tabled in OUT/attempts.parquet, and (`likelihood`) the
    likelihood figures on the tasks' reference set (training.scoring). An attempt that
    ended in a sandbox error fails the evaluation: the sandbox failed, not the model."""
    verify(tasks, rollouts, out / "verification", sandboxes, grading, progress=True, progress_bar=False)
    table = attempts_table(
        pl.read_parquet(rollouts / "trajectories.parquet"),
        pl.read_parquet(out / "verification" / "reports.parquet"),
    )
    table.write_parquet(out / "attempts.parquet")
    broken = table.filter(pl.col("exit_reason") == "sandbox_error")
    if broken.height:
        raise RuntimeError(f"{broken.height} attempt(s) of {label} ended in a sandbox error; see {rollouts}")
    scored = None
    if likelihood:
        # torch is imported only when a stage scores: the assets' definitions load without it
        from training.scoring import checkpoint_likelihood

        scored = checkpoint_likelihood(
            checkpoint,
            tasks,
            backend=sandboxes.backend,
            workers=sandboxes.workers,
            resamples=resamples,
            matched_samples=matched_samples,
            sampling=sampling,
        )
    return round_metrics(
        table,
        round_key=label,
        checkpoint_hash=checkpoint_hash(str(checkpoint)),
        k=k,
        resamples=resamples,
        likelihood=scored,
    )
