"""Batch rollouts: K attempts per task, N concurrent sandboxes, resumable.

Layout of OUT (docs/formats/trajectory.md):
    OUT/trajectories.parquet, OUT/steps.parquet   table form, rebuilt at the end
    OUT/jsonl/<task id>/<trajectory id>.jsonl     file form (messages)
    OUT/records/<trajectory id>.json              full record; its presence marks the attempt done
    OUT/actions/<task id>/<trajectory id>.jsonl   the harness's action log of the episode

An attempt's id is a function of (task, task hash, policy, attempt index, seed),
and every file is written atomically, so a run killed at any point resumes by
skipping the attempts whose record exists, and never duplicates one. An attempt
the sandbox itself failed (`sandbox_error`: a Docker daemon restarted, a container
lost) is not the policy's outcome: a rerun redoes it, under the same id.
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from tqdm import tqdm

from touchstone.agent.loop import EpisodeLimits, run_episode
from touchstone.agent.policies import Policy, make_policy
from touchstone.agent.policies.spec import PolicySpec
from touchstone.episode.trajectory import (
    Sampling,
    Trajectory,
    atomic_write_text,
    trajectory_id,
    stream_tables,
    write_messages_jsonl,
)
from touchstone.concurrency import bounded_map
from touchstone.tasks.schema import TASK_FILE, Task, load_task, load_task_set

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Attempt:
    task: Task
    index: int
    trajectory_id: str


def load_tasks(tasks: str | Path | list[Task]) -> list[Task]:
    """A task list from a task directory, a task-set directory, or a list."""
    if isinstance(tasks, list):
        return tasks
    path = Path(tasks)
    return [load_task(path)] if (path / TASK_FILE).is_file() else load_task_set(path)


def plan_attempts(tasks: list[Task], policy: Policy, attempts: int) -> list[Attempt]:
    plan = []
    for task in tasks:
        task_hash = task.content_hash
        for i in range(attempts):
            seed = policy.sampling.attempt_seed(i)
            plan.append(Attempt(task, i, trajectory_id(task.id, task_hash, policy.identity, i, seed)))
    return plan


def record_path(out: Path, tid: str) -> Path:
    return out / "records" / f"{tid}.json"


def _done(out: Path, tid: str) -> bool:
    """Recorded, and not cut off by the sandbox itself (a rerun redoes those)."""
    path = record_path(out, tid)
    return path.is_file() and json.loads(path.read_text())["exit_reason"] != "sandbox_error"


def sandbox_failures(out: Path) -> list[Trajectory]:
    """The recorded attempts that the sandbox failed (infrastructure, not the policy)."""
    return [t for t in iter_records(out) if t.exit_reason == "sandbox_error"]


def iter_records(out: Path) -> Iterator[Trajectory]:
    """The finished attempts' records, in trajectory id order, read one at a time."""
    for path in sorted((out / "records").glob("t-*.json"), key=lambda p: p.stem):
        yield Trajectory.model_validate_json(path.read_text())


def read_records(out: Path) -> list[Trajectory]:
    return list(iter_records(out))


def _run_attempt(attempt: Attempt, policy: Policy, out: Path, backend: str, limits: EpisodeLimits) -> str:
    """Run and record one attempt; returns its exit reason (the record is on disk, not kept)."""
    action_log = out / "actions" / attempt.task.id / f"{attempt.trajectory_id}.jsonl"
    action_log.parent.mkdir(parents=True, exist_ok=True)
    action_log.unlink(missing_ok=True)  # left by a killed run; the episode starts over
    traj = run_episode(
        attempt.task, policy, attempt=attempt.index, backend=backend, limits=limits, action_log=action_log
    )
    write_messages_jsonl(out / "jsonl" / traj.task_id / f"{traj.trajectory_id}.jsonl", traj.messages)
    atomic_write_text(record_path(out, traj.trajectory_id), traj.model_dump_json())  # last: marks done
    return traj.exit_reason


def solve(
    tasks: str | Path | list[Task],
    policy_spec: PolicySpec,
    attempts: int = 1,
    workers: int = 1,
    out: str | Path = "trajectories",
    sampling: Sampling | None = None,
    backend: str = "auto",
    limits: EpisodeLimits | None = None,
    progress: bool = True,
) -> Path:
    """Run `attempts` episodes of `policy_spec` on every task, `workers` at a time,
    into `out`; resumes a previous run into the same `out`. Returns `out`.

    Attempts that fail for an unexpected reason (a bug, not a policy or sandbox
    failure, which are recorded as exit reasons) are logged and left undone, so
    a rerun retries them; the tables cover every finished attempt."""
    if attempts < 1 or workers < 1:
        raise ValueError(f"attempts and workers must be >= 1 (got {attempts}, {workers})")
    out = Path(out)
    task_list = load_tasks(tasks)
    for stale in out.glob("**/.*.tmp"):  # half-written files of a killed run
        stale.unlink()
    policy = make_policy(policy_spec, sampling)
    policy.group_attempts(attempts, workers)
    limits = limits or EpisodeLimits()
    try:
        plan = plan_attempts(task_list, policy, attempts)
        todo = [a for a in plan if not _done(out, a.trajectory_id)]
        counts: Counter[str] = Counter()
        with (
            ThreadPoolExecutor(max_workers=workers) as pool,
            tqdm(
                total=len(plan), initial=len(plan) - len(todo), desc=f"solve {policy_spec}", disable=not progress
            ) as bar,
        ):
            for a, fut in bounded_map(pool, lambda a: _run_attempt(a, policy, out, backend, limits), todo, 2 * workers):
                try:
                    counts[fut.result()] += 1
                except Exception:  # noqa: BLE001 - keep the batch going; a rerun retries it
                    log.exception("attempt %s of task %s failed", a.index, a.task.id)
                    counts["crashed"] += 1
                bar.set_postfix(counts)
                bar.update()
    finally:
        policy.close()
    stream_tables(lambda: iter_records(out), out)
    if counts["crashed"]:
        raise RuntimeError(f"{counts['crashed']} attempt(s) crashed (see log); rerun to retry them")
    return out


def merge_rollouts(parts: list[Path], out: Path) -> None:
    """Concatenate the trajectories/steps tables of several `solve` outputs
    (one per policy of a round) into `out`."""
    import polars as pl

    for name in ("trajectories.parquet", "steps.parquet"):
        frames = [pl.read_parquet(p / name) for p in parts if (p / name).exists()]
        pl.concat(frames, how="diagonal_relaxed").write_parquet(out / name)
