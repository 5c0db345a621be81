"""The cost of isolation: the hidden tests run with the candidate importable in
the pytest process (in-process, as before isolation) against the isolated run
(judge and candidate in two sandboxes), on the same tree, side by side.

    python -m benchmarks.bench_isolation [--backend bwrap] [--reps 5]

Rows: per canary task (its reference as the solution), the median wall time
of one graded run each way and the ratio; then per honest canary trajectory,
a full verification (replay, audits, k isolated test runs, oracle) against one
bare pytest run of the same tree (the floor; target: within 5x)."""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.bench_verify import floor_s
from touchstone.harness.isolation import compose_trees, run_isolated
from touchstone.tasks.schema import load_task
from touchstone.verify import grading
from touchstone.verify.canaries import TASKS, load_canaries
from touchstone.verify.tree import assemble
from touchstone.verify.verifier import _Grader, verify_trajectory


def _median_s(fn, reps: int) -> float:
    times = []
    for _ in range(reps):
        started = time.monotonic()
        result = fn()
        times.append(time.monotonic() - started)
        assert result.status == "pass", result.evidence
    return statistics.median(times)


def run_cost(task_dir: Path, backend: str, reps: int) -> dict:
    task = load_task(task_dir)
    grader = _Grader(task, backend, set())
    reference = {p.relative_to(task.reference_dir).as_posix(): p.read_bytes()
                 for p in task.reference_dir.rglob("*") if p.is_file()}  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "inproc"
        assemble(task.workspace_dir, reference, [], [task.hidden_tests_dir], tree)
        trees = compose_trees(task.workspace_dir, reference, [], task.hidden_tests_dir, Path(tmp) / "iso")
        args = (grader.test_files, grader.required, grader.prefixes)
        inproc = _median_s(lambda: grading.run_tests(tree, *args, timeout=task.timeout_s, backend=backend), reps)
        isolated = _median_s(lambda: run_isolated(trees, *args, timeout=task.timeout_s, backend=backend), reps)
    return {"task": task.id, "in_process_s": round(inproc, 2), "isolated_s": round(isolated, 2),
            "ratio": round(isolated / inproc, 2)}  # fmt: skip


def verification_cost(backend: str, replays: int) -> list[dict]:
    rows = []
    for c in load_canaries({"honest"}):
        task = load_task(c.task_dir)
        started = time.monotonic()
        report = verify_trajectory(task, c.messages, replays=replays, backend=backend)
        full = time.monotonic() - started
        floor = floor_s(task, c.messages, backend)
        rows.append({"canary": c.name, "verdict": report.verdict, "isolation": report.isolation,
                     "full_s": round(full, 2), "floor_s": round(floor, 2), "ratio": round(full / floor, 1)})
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="bwrap")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--replays", type=int, default=3)
    args = parser.parse_args()
    runs = [run_cost(d, args.backend, args.reps) for d in sorted(TASKS.iterdir()) if (d / "reference").is_dir()]
    full = verification_cost(args.backend, args.replays)
    notes = [
        f"backend {args.backend}; run rows: median of {args.reps} graded runs of the task's reference, "
        "in-process (one sandbox, candidate importable in pytest) vs isolated (two sandboxes, proxies)",
        f"median run ratio isolated / in-process: {statistics.median(r['ratio'] for r in runs)}",
        f"verification rows: full verification (k = {args.replays} test runs, isolated where the task is) / one "
        f"bare pytest run; median {statistics.median(r['ratio'] for r in full)}x (target: within 5x)",
    ]
    print(json.dumps({"bench": "isolation", "results": runs + full, "notes": notes}))


if __name__ == "__main__":
    main()
