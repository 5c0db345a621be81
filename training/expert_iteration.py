"""One round of expert iteration as a library call: sample `attempts` runs per task from a
checkpoint, verify them with the independent verifier, and fine-tune the checkpoint on its own
accepted runs (SFT with turn-level credit, LoRA when the config says so).

The Dagster round (`orchestration/deploy/local-smollm2.yaml`) is the same loop with lineage,
checks and the promotion gate; this function is what a test, a benchmark or an experiment
runs without an instance. Teacher runs are an explicit option (`teacher_attempts`), and the
result always says how many training rows the model itself wrote.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from touchstone.checkpoint import checkpoint_hash
from touchstone.agent.policies.spec import TEACHER, PolicySpec


class ExpertIterationResult(BaseModel):
    round: str
    start_hash: str
    checkpoint: str  # the trained checkpoint's directory; the start's when nothing was trained
    checkpoint_hash: str
    trained: bool
    runs: int
    accepted: int
    tasks_solved: int  # tasks with at least one accepted run of the model itself
    rows: int
    authors: dict[str, int]  # SFT rows per author (touchstone.data.build.row_author)
    own_share: float | None
    rollout_s: float
    rollouts_per_min: float


def expert_iteration_round(
    checkpoint: Path,
    tasks_dir: Path,
    work: Path,
    *,
    round_key: str = "r000",
    attempts: int = 4,
    sampling=None,
    limits=None,
    trainer_config: dict[str, Any] | None = None,
    backend: str = "auto",
    workers: int = 1,
    teacher_attempts: int = 0,
) -> ExpertIterationResult:
    """Sample, verify, train on the model's own accepted runs (plus the teacher's, labelled, when
    `teacher_attempts` > 0). Writes rollouts/, verify/, data/ and model/ under `work`."""
    from touchstone.agent.rollout import merge_rollouts, solve
    from touchstone.data.build import build_datasets
    from touchstone.tasks.schema import load_task_set
    from touchstone.verify import verify_batch
    from training.train import train

    tasks = load_task_set(tasks_dir)
    spec = PolicySpec("hf", str(checkpoint))
    started = time.monotonic()
    parts = [solve(tasks, spec, attempts, workers, work / "model_runs", sampling, backend, limits, progress=False)]
    rollout_s = time.monotonic() - started
    if teacher_attempts:
        parts.append(solve(tasks, TEACHER, teacher_attempts, workers, work / "teacher_runs", None, backend))
    rollouts = work / "rollouts"
    rollouts.mkdir(parents=True, exist_ok=True)
    merge_rollouts(parts, rollouts)
    verify_batch(tasks_dir, rollouts, workers=workers, out=work / "verify", backend=backend)
    summary = build_datasets(
        work / "verify" / "reports.parquet", rollouts / "trajectories.parquet", work / "data", round_key=round_key
    )
    sft = summary.datasets["sft"]
    out, trained = checkpoint, bool(sft.rows)
    if trained:
        out = work / "model"
        train("sft", data_dir=work / "data", base=checkpoint, out=out, round_key=round_key, config=trainer_config)
    own = _own_accepted(work)
    runs = len(tasks) * attempts
    return ExpertIterationResult(
        round=round_key,
        start_hash=checkpoint_hash(checkpoint),
        checkpoint=str(out),
        checkpoint_hash=checkpoint_hash(out),
        trained=trained,
        runs=summary.inputs,
        accepted=summary.verdicts.get("accept", 0),
        tasks_solved=len(own),
        rows=sft.rows,
        authors=sft.authors,
        own_share=sft.own_share,
        rollout_s=round(rollout_s, 1),
        rollouts_per_min=round(60 * runs / rollout_s, 2) if rollout_s else 0.0,
    )


def _own_accepted(work: Path) -> set[str]:
    """Tasks with an accepted run written by the model itself."""
    import polars as pl

    from touchstone.data.build import MODEL, row_author
    from touchstone.verify.batch import read_reports

    reports = read_reports(work / "verify")
    policies = dict(
        pl.read_parquet(work / "rollouts" / "trajectories.parquet").select("trajectory_id", "policy").iter_rows()
    )
    return {
        r.task_id for r in reports if r.verdict == "accept" and row_author(policies.get(r.trajectory_id, "")) == MODEL
    }
