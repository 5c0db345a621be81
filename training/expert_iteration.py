"""One round of expert iteration as a library call: sample `attempts` runs per task from a
checkpoint, verify them with the independent verifier, and fine-tune the checkpoint on its own
accepted runs (SFT with turn-level credit, LoRA when the config says so).

The Dagster round (`orchestration/deploy/local-smollm2.yaml`) is the same loop with lineage,
checks and the promotion gate; this function is what a test, a benchmark or an experiment
runs without an instance. Teacher runs are an explicit option (`teacher_attempts`), and the
result always says how many training rows the model itself wrote.
"""

from __future__ import annotations

import json
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
    from touchstone.agent.rollout import merge_rollouts
    from touchstone.data.build import build_datasets
    from touchstone.tasks.schema import load_task_set
    from training.round_engine import Sandboxes, roll_out, verify
    from training.train import train

    tasks = load_task_set(tasks_dir)
    spec = PolicySpec("hf", str(checkpoint))
    sandboxes = Sandboxes(backend=backend, workers=workers)
    started = time.monotonic()
    parts = [roll_out(tasks, spec, attempts, work / "model_runs", sandboxes, sampling=sampling, limits=limits)]
    rollout_s = time.monotonic() - started
    if teacher_attempts:
        parts.append(roll_out(tasks, TEACHER, teacher_attempts, work / "teacher_runs", sandboxes))
    rollouts = work / "rollouts"
    rollouts.mkdir(parents=True, exist_ok=True)
    merge_rollouts(parts, rollouts)
    verify(tasks_dir, rollouts, work / "verify", sandboxes)
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


def evaluate_heldout(checkpoint: Path, heldout: Path, out: Path, *, attempts: int, sampling=None, limits=None,
                     backend: str = "auto", workers: int = 1) -> dict[str, Any]:  # fmt: skip
    """Held-out pass@1 and pass@k (bootstrap intervals over tasks) of `checkpoint`, sampled
    figures only, written to `out/metrics.json` with the wall time."""
    from touchstone.tasks.schema import load_task_set
    from training.evaluation import evaluate_checkpoint

    started = time.monotonic()
    metrics = evaluate_checkpoint(
        checkpoint, load_task_set(heldout), out, label=out.name, attempts=attempts, backend=backend,
        workers=workers, sampling=sampling, limits=limits, likelihood=False,
    )  # fmt: skip
    result = metrics.model_dump(mode="json") | {
        "checkpoint": str(checkpoint),
        "wall_s": round(time.monotonic() - started, 1),
    }
    (out / "metrics.json").write_text(json.dumps(result, indent=1))
    return result


def lora_config(steps: int, top_layers: int = 0, learning_rate: float = 2e-4) -> dict[str, Any]:
    """The study's trainer config: LoRA r 16 (on the top `top_layers` layers only when set:
    backward stops below them, a CPU step costs less), batch 2, `steps` steps."""
    peft: dict[str, Any] = {"r": 16, "lora_alpha": 32, "top_layers": top_layers}
    return {"max_steps": steps, "per_device_train_batch_size": 2, "max_length": 2048,
            "learning_rate": learning_rate, "peft": peft}  # fmt: skip


def main() -> None:
    """The study's steps as separate processes (docs/EXPERIMENTS.md, "Expert iteration with
    SmolLM2"), so that independent ones run side by side on a small machine:

        python -m training.expert_iteration round   --start CK --tasks TRAIN --work DIR/r000
        python -m training.expert_iteration control --start CK --data DIR/r000/data --work DIR/control2
        python -m training.expert_iteration eval    --start CK --tasks HELDOUT --work DIR/eval-x

    `round`: sample, verify, train on the model's own accepted runs (result.json); `control`:
    the same training steps on given data (round 0's); `eval`: held-out pass@1/pass@k."""
    import argparse

    from touchstone.agent.loop import EpisodeLimits
    from touchstone.episode.trajectory import Sampling
    from training.train import train

    p = argparse.ArgumentParser()
    p.add_argument("step", choices=("round", "control", "eval"))
    for name in ("--start", "--work"):
        p.add_argument(name, type=Path, required=True)
    p.add_argument("--tasks", type=Path)
    p.add_argument("--data", type=Path)
    p.add_argument("--round-key", default="r000")
    for name, default in (("--attempts", 2), ("--steps", 6), ("--top-layers", 0), ("--max-turns", 3),
                          ("--max-tokens", 160), ("--seed", 0), ("--workers", 2)):  # fmt: skip
        p.add_argument(name, type=int, default=default)
    p.add_argument("--learning-rate", type=float, default=2e-4)
    a = p.parse_args()
    sampling = Sampling(temperature=0.7, top_p=0.95, max_tokens=a.max_tokens, seed=a.seed)
    limits = EpisodeLimits(max_turns=a.max_turns)
    config = lora_config(a.steps, a.top_layers, a.learning_rate) | {"seed": a.seed}
    started = time.monotonic()
    if a.step == "eval":
        result = evaluate_heldout(a.start, a.tasks, a.work, attempts=a.attempts, sampling=sampling, limits=limits,
                                  backend="bwrap", workers=a.workers)  # fmt: skip
    elif a.step == "round":
        result = expert_iteration_round(
            a.start, a.tasks, a.work, round_key=a.round_key, attempts=a.attempts, sampling=sampling, limits=limits,
            trainer_config=config, backend="bwrap", workers=a.workers,
        ).model_dump() | {"wall_s": round(time.monotonic() - started, 1)}  # fmt: skip
    else:
        manifest = train(
            "sft", data_dir=a.data, base=a.start, out=a.work / "model", round_key=a.round_key, config=config
        )
        result = {"checkpoint": str(a.work / "model"), "checkpoint_hash": manifest.content_hash,
                  "wall_s": round(time.monotonic() - started, 1)}  # fmt: skip
    a.work.mkdir(parents=True, exist_ok=True)
    (a.work / "result.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
