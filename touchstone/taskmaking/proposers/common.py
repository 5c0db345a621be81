"""What every proposer shares: build candidates in parallel, validate each one,
keep or drop it with a recorded reason, and write the index."""

from __future__ import annotations

import re
import shutil
import threading
from collections.abc import Callable, Iterable
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from tqdm import tqdm

from touchstone.taskmaking.index import IndexRow, read_index, row_for, write_index
from touchstone.harness import TestRunResult
from touchstone.tasks.schema import HIDDEN_TESTS, REFERENCE, WORKSPACE, Task, TaskError, TaskSource, load_task
from touchstone.taskmaking.validate import Validation, ValidationConfig, validate_task
from touchstone.audit.static_audit import reference_rules


SOLUTION = "solution.py"
VERDICTS_FILE = "validations.jsonl"  # one full Validation record per candidate
_VERDICTS_LOCK = threading.Lock()
SOLUTION_TESTS = "test_solution.py"


@dataclass
class Candidate:
    """A task to be. `build(dir)` writes the task directory and returns the loaded
    Task (with the run of its starting workspace when it made one), or a
    rejecting Validation when the candidate dies before validation (a mutant
    that does not compile, a mutant no test notices, ...)."""

    id: str
    source: TaskSource
    build: Callable[[Path], tuple[Task, TestRunResult | None] | Validation]


def slug(text: str) -> str:
    """A task id fragment: [A-Za-z0-9._-] only."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-.")[:80] or "task"


def write_solution_task(task_dir: Path, task: Task, *, stub: str, reference: str, tests: str) -> Task:
    """A single-file task: workspace/solution.py (stub), reference/solution.py,
    hidden_tests/test_solution.py, task.json."""
    for sub, name, text in (
        (WORKSPACE, SOLUTION, stub),
        (REFERENCE, SOLUTION, reference),
        (HIDDEN_TESTS, SOLUTION_TESTS, tests),
    ):
        (task_dir / sub).mkdir(parents=True, exist_ok=True)
        (task_dir / sub / name).write_text(text if text.endswith("\n") else text + "\n")
    task.write(task_dir)
    return load_task(task_dir)


def with_audit_allow(task: Task) -> Task:
    """Record in `source.meta.audit_allow` the static rules the reference's own
    code trips (beyond what the starting workspace already holds), so an honest
    solution written like the reference is not rejected for it. Mutation
    tasks need none: the verifier takes their original as a baseline, which
    allows restoring the mutated line without allowing the rule elsewhere."""
    if task.reference_dir is None or task.source.proposer == "mutation":
        return task
    needed = set(reference_rules(task.workspace_dir, task.reference_dir)) - set(task.source.meta.get("audit_allow", []))
    if not needed:
        return task
    meta = {**task.source.meta, "audit_allow": sorted(set(task.source.meta.get("audit_allow", [])) | needed)}
    task.model_copy(update={"source": task.source.model_copy(update={"meta": meta})}).write(task.dir)
    return load_task(task.dir)


def reject(task_id: str, reason: str, detail: str) -> Validation:
    return Validation(
        task_id=task_id,
        kept=False,
        reason=reason,
        detail=detail,
        validated_at=datetime.now(UTC).isoformat(timespec="seconds"),
    )


def _process(c: Candidate, out: Path, cfg: ValidationConfig) -> tuple[IndexRow, Task | None]:
    task_dir = out / c.id
    shutil.rmtree(task_dir, ignore_errors=True)
    try:
        built = c.build(task_dir)
        if not isinstance(built, Validation):
            built = (with_audit_allow(built[0]), built[1])
        task = None if isinstance(built, Validation) else built[0]
        verdict = built if isinstance(built, Validation) else validate_task(built[0], cfg, start=built[1])
    except TaskError as exc:
        task, verdict = None, reject(c.id, "malformed", str(exc))
    except Exception as exc:  # noqa: BLE001 - recorded with its type, not fatal: one broken candidate
        # (sandbox failure, odd seed code) must not end a long run and lose the others' results
        task, verdict = None, reject(c.id, "error", f"{type(exc).__name__}: {exc}")
    with _VERDICTS_LOCK, (out / VERDICTS_FILE).open("a") as f:
        f.write(verdict.model_dump_json() + "\n")  # every check and run behind the index row
    task = task if verdict.kept else None
    if task is None:
        shutil.rmtree(task_dir, ignore_errors=True)  # rejected candidates keep only their index row
    return row_for(c.id, c.source, verdict, task), task


def run_candidates(
    candidates: Iterable[Candidate], out: Path, *, n: int | None, workers: int, cfg: ValidationConfig, desc: str
) -> tuple[list[IndexRow], list[Task]]:
    """Validate candidates with `workers` in parallel until `n` are kept (None: all)."""
    out.mkdir(parents=True, exist_ok=True)
    rows: list[IndexRow] = []
    kept: list[Task] = []
    it = iter(candidates)
    bar = tqdm(total=n, desc=desc, unit="task")
    with ThreadPoolExecutor(max_workers=workers) as pool:
        running: set[Future] = set()
        seen: set[str] = set()
        exhausted = False
        while True:
            while not exhausted and len(running) < workers and (n is None or len(kept) + len(running) < n):
                c = next(it, None)
                if c is None:
                    exhausted = True
                elif c.id in seen:  # the same candidate twice: never let two share a directory
                    continue
                else:
                    seen.add(c.id)
                    running.add(pool.submit(_process, c, out, cfg))
            if not running:
                break
            done, running = wait(running, return_when=FIRST_COMPLETED)
            for fut in done:
                row, task = fut.result()
                rows.append(row)
                if task is not None:
                    kept.append(task)
                    bar.update(1)
                bar.set_postfix(rejected=len(rows) - len(kept))
            finalize(out, rows)
    bar.close()
    return rows, kept


def finalize(out: Path, rows: list[IndexRow]) -> Path:
    """Write the index: `rows` merged with the one already there (rewritten after
    every candidate, so an interrupted run keeps its verdicts)."""
    known = {r.id: r for r in read_index(out)}
    known.update((r.id, r) for r in rows)
    return write_index(out, sorted(known.values(), key=lambda r: r.id))
