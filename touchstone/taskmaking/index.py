"""The task-set index: DIR/index.parquet, one row per candidate (kept or rejected),
queryable with DuckDB (`SELECT reason, count(*) FROM 'DIR/index.parquet' GROUP BY 1`).
Columns: docs/formats/task.md."""

from __future__ import annotations

from pathlib import Path

import duckdb
import polars as pl
from pydantic import BaseModel

from touchstone import atomic, tables
from touchstone.tasks.schema import INDEX_FILE, Task, TaskSource
from touchstone.taskmaking.validate import Validation

# Beside the index, from the LLM proposer: one row per candidate with its solve rate and
# reward (docs/formats/task.md); revocation sets a revoked task's reward to 0.
REWARDS_FILE = "proposer_rewards.parquet"


class IndexRow(BaseModel):
    id: str
    proposer: str
    origin: str
    unit: str
    operator: str | None = None
    n_fail_to_pass: int = 0
    n_pass_to_pass: int = 0
    content_hash: str | None = None
    status: str  # kept | rejected
    reason: str | None = None
    detail: str = ""
    mutation_score: float | None = None
    ref_seconds: float | None = None
    difficulty: float | None = None
    validated_at: str = ""
    # self-proposed tasks (touchstone.tasks.selfplay): the proposing policy and its weights' hash
    policy: str | None = None
    policy_checkpoint: str | None = None


def row_for(task_id: str, source: TaskSource, verdict: Validation, task: Task | None = None) -> IndexRow:
    return IndexRow(
        id=task_id,
        proposer=source.proposer,
        origin=source.origin,
        unit=source.unit,
        operator=source.operator,
        n_fail_to_pass=verdict.n_fail_to_pass,
        n_pass_to_pass=verdict.n_pass_to_pass,
        content_hash=task.content_hash if task is not None and verdict.kept else None,
        status="kept" if verdict.kept else "rejected",
        reason=verdict.reason,
        detail=verdict.detail,
        mutation_score=verdict.mutation_score,
        ref_seconds=verdict.ref_seconds,
        difficulty=verdict.difficulty,
        validated_at=verdict.validated_at,
        policy=source.meta.get("proposal", {}).get("policy"),
        policy_checkpoint=source.meta.get("proposal", {}).get("checkpoint_hash"),
    )


def write_index(root: Path, rows: list[IndexRow]) -> Path:
    """Write (replace) root/index.parquet atomically: a crash never leaves half a file."""
    frame = pl.DataFrame([tables.to_row(r) for r in rows], schema=tables.polars_schema(IndexRow))
    path = root / INDEX_FILE
    atomic.write_parquet(frame, path)
    return path


def read_index(root: Path) -> list[IndexRow]:
    path = root / INDEX_FILE
    if not path.is_file():
        return []
    return [IndexRow.model_validate(r) for r in pl.read_parquet(path).to_dicts()]


def query(root: Path, sql: str) -> list[tuple]:
    """Run SQL against the index, exposed as the view `tasks`."""
    con = duckdb.connect()
    try:
        con.execute(f"CREATE VIEW tasks AS SELECT * FROM read_parquet('{(root / INDEX_FILE).as_posix()}')")
        return con.execute(sql).fetchall()
    finally:
        con.close()
