"""Revoking a kept task whose reference later fails in grading.

Validation ran the reference under grading's conditions, so a reference that
fails when graded later means the task passed validation by luck or by design
(a test that reads its conditions, a race, a clock window). The task leaves the
set and its proposer loses the reward it earned for it:

- the index row becomes `status = revoked`, `reason = <why>`, `detail = <evidence>`;
- the task directory moves to `DIR/.revoked/<id>/` (hidden: no longer a task of
  the set, kept for inspection);
- in `DIR/proposer_rewards.parquet` (LLM proposals) the task's reward becomes
  0 and `revoked` true, the earned reward kept in `reward_before_revocation`;
- one JSON line per revocation is appended to `DIR/revocations.jsonl`.

`regrade_reference(task)` runs the reference under grading's run plan;
`revoke_if_reference_fails(set_dir, task)` does both for one task, and
`revoke_failing_references(set_dir)` for every kept task of a set: a round's
verification stage calls it on the round's task set before it grades the
trajectories, so the trajectories of a revoked task are reported against a
revoked task (an `error` check naming the revocation) and never become training data.
"""

from __future__ import annotations

import json
import shutil
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import polars as pl
from pydantic import BaseModel

from touchstone import atomic
from touchstone.taskmaking.conditions import Condition, RunRecord, grading_backend, run_condition
from touchstone.taskmaking.index import REWARDS_FILE, read_index, write_index
from touchstone.tasks.schema import Task, load_task_set

REVOKED_DIR = ".revoked"
REVOCATIONS_FILE = "revocations.jsonl"


class Revocation(BaseModel):
    task_id: str
    reason: str
    evidence: str
    revoked_at: str
    reward_before: float | None = None  # the proposer's reward taken back (None: no reward recorded)
    moved_to: str | None = None


class RevokeError(LookupError):
    """The task is not a kept task of the set."""


def revoke(set_dir: Path, task_id: str, evidence: str, reason: str = "reference_fails_in_grading") -> Revocation:
    rows = {r.id: r for r in read_index(set_dir)}
    row = rows.get(task_id)
    if row is None or row.status != "kept":
        raise RevokeError(
            f"{set_dir}: no kept task {task_id!r} in the index (status: {row.status if row else 'absent'})"
        )
    rows[task_id] = row.model_copy(update={"status": "revoked", "reason": reason, "detail": evidence})
    write_index(set_dir, sorted(rows.values(), key=lambda r: r.id))
    moved = None
    if (set_dir / task_id).is_dir():
        dest = set_dir / REVOKED_DIR / task_id
        shutil.rmtree(dest, ignore_errors=True)
        dest.parent.mkdir(exist_ok=True)
        shutil.move(set_dir / task_id, dest)
        moved = str(dest)
    rec = Revocation(
        task_id=task_id,
        reason=reason,
        evidence=evidence,
        moved_to=moved,
        reward_before=_take_back_reward(set_dir, task_id),
        revoked_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )
    with (set_dir / REVOCATIONS_FILE).open("a") as f:
        f.write(rec.model_dump_json() + "\n")
    return rec


def _take_back_reward(set_dir: Path, task_id: str) -> float | None:
    path = set_dir / REWARDS_FILE
    if not path.is_file():
        return None
    df = pl.read_parquet(path)
    if "revoked" not in df.columns:
        df = df.with_columns(pl.lit(False).alias("revoked"), pl.col("reward").alias("reward_before_revocation"))
    hit = df.filter(pl.col("task_id") == task_id)
    if hit.is_empty():
        return None
    before = hit["reward_before_revocation"][0]
    mine = pl.col("task_id") == task_id
    df = df.with_columns(
        pl.when(mine).then(0.0).otherwise(pl.col("reward")).alias("reward"),
        pl.when(mine).then(True).otherwise(pl.col("revoked")).alias("revoked"),
    )
    atomic.write_parquet(df, path)
    return before


def regrade_reference(task: Task, backend: str = "auto", runs: int = 3) -> list[RunRecord]:
    """The reference under grading's runs 0..runs-1."""
    b = grading_backend(backend)
    return [
        run_condition(task, Condition(run=i, backend=b, grading=True), role="reference", with_reference=True)
        for i in range(runs)
    ]


def _failure(runs: list[RunRecord]) -> str | None:
    """Why the reference fails grading (any run counts: validation passed every one
    of them, so a failure now means the task depends on luck), or None. A run cut
    off by the timeout proves nothing (a loaded machine is not a broken task)."""
    failing = [r for r in runs if not r.ok and not r.timed_out]
    if not failing:
        return None
    r = failing[0]
    what = json.dumps(dict(list(r.failed.items())[:3])) if r.failed else "no test passed"
    return f"reference fails in grading on {len(failing)} of {len(runs)} runs, e.g. {r.condition.label()}: {what}"


def revoke_if_reference_fails(set_dir: Path, task: Task, backend: str = "auto", runs: int = 3) -> Revocation | None:
    why = _failure(regrade_reference(task, backend, runs))
    return revoke(set_dir, task.id, why) if why else None


def revoke_failing_references(
    set_dir: Path, *, backend: str = "auto", runs: int = 3, workers: int = 2
) -> list[Revocation]:
    """Regrade the reference of every kept task of the set under grading's runs
    0..runs-1 (`workers` at once) and revoke each that fails one of them."""
    kept = {r.id for r in read_index(set_dir) if r.status == "kept"}
    tasks = [t for t in load_task_set(set_dir) if t.id in kept and t.reference_dir is not None]
    with ThreadPoolExecutor(max(1, workers)) as pool:
        why = list(pool.map(lambda t: _failure(regrade_reference(t, backend, runs)), tasks))
    return [revoke(set_dir, t.id, w) for t, w in zip(tasks, why) if w]  # one index writer at a time
