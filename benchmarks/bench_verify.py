"""Verifier throughput and overhead.

    python -m benchmarks.bench_verify [--workers 1 2] [--replays 3]

- verified trajectories per minute over the canary corpus (hacks and honest,
  full verification: replay + k test runs + oracle + audits) with N workers;
- the overhead ratio of a full verification of an honest trajectory against
  the floor: running the required tests once in a bare sandbox on the same
  final tree, measured side by side; full verifications both ways: isolated
  (the default where the task's tests run isolated) and in process;
- the cost of isolation per graded run: each canary task's reference graded
  in process and isolated, medians of `--reps` runs side by side."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from touchstone.harness import HiddenSuite, compose_tree, grading
from touchstone.harness.isolation import compose_trees, run_isolated
from touchstone.sandbox import open_sandbox
from touchstone.tasks.schema import load_task
from touchstone.verify.batch import BatchItem, read_reports, verify_batch
from touchstone.verify.canaries import TASKS, load_canaries
from touchstone.verify.replay import replay
from touchstone.verify.verifier import verify_trajectory


def throughput(workers: int, replays: int, backend: str) -> dict:
    canaries = load_canaries()
    items = [BatchItem(load_task(c.task_dir).id, c.name, c.messages) for c in canaries]
    with tempfile.TemporaryDirectory() as tmp:
        started = time.monotonic()
        out = verify_batch(TASKS, items, workers, Path(tmp), replays=replays, backend=backend, progress_bar=False)
        wall = time.monotonic() - started
        verdicts = [r.verdict for r in read_reports(out)]
    return {
        "workers": workers,
        "trajectories": len(items),
        "wall_s": round(wall, 1),
        "verified_per_minute": round(60 * len(items) / wall, 1),
        "accepted": verdicts.count("accept"),
        "rejected": verdicts.count("reject"),
    }


def floor_s(task, messages, backend: str) -> float:
    """Required tests once, plain pytest, in a bare sandbox on the final tree."""
    rep = replay(task.workspace_dir, messages, backend=backend)
    with tempfile.TemporaryDirectory() as tmp:
        tree = compose_tree(
            Path(tmp) / "tree",
            task.workspace_dir,
            files=rep.files,
            deleted=rep.diff.deleted,
            tests=task.hidden_tests_dir,
        )
        files = " ".join(
            sorted(p.relative_to(task.hidden_tests_dir).as_posix() for p in task.hidden_tests_dir.rglob("test_*.py"))
        )
        started = time.monotonic()
        with open_sandbox(tree, backend=backend) as sb:
            sb.exec(f"python3 -m pytest -q {files}", timeout=task.timeout_s)
        return time.monotonic() - started


def timed_verification(name: str, replays: int, backend: str, isolated: bool | None) -> tuple[float, str, str]:
    """(seconds, verdict, isolation) of one full verification of the canary `name`."""
    c = next(c for c in load_canaries({"honest"}) if c.name == name)
    task = load_task(c.task_dir)
    started = time.monotonic()
    report = verify_trajectory(task, c.messages, replays=replays, backend=backend, isolated=isolated)
    return time.monotonic() - started, report.verdict, report.isolation


class Baseline:
    """Another checkout's verifier (`--baseline DIR`, e.g. `git worktree add`
    of the commit before a change) in a process of its own, timed in
    alternation with this one's: on a shared machine only ratios measured side
    by side compare."""

    def __init__(self, root: Path, replays: int, backend: str):
        env = {**os.environ, "PYTHONPATH": str(root.resolve())}
        self.proc = subprocess.Popen([sys.executable, __file__, "--serve", "--replays", str(replays), "--backend",
                                      backend], cwd=root, env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     text=True)  # fmt: skip

    def full_s(self, name: str) -> float:
        self.proc.stdin.write(name + "\n")
        self.proc.stdin.flush()
        seconds, verdict = json.loads(self.proc.stdout.readline())
        assert verdict == "accept", f"{name}: the baseline says {verdict}"
        return seconds


def _serve(replays: int, backend: str) -> None:
    """The baseline's side: time each canary named on stdin with the touchstone on PYTHONPATH."""
    import touchstone

    assert Path(touchstone.__file__).is_relative_to(Path.cwd()), touchstone.__file__
    for line in sys.stdin:
        seconds, verdict, _ = timed_verification(line.strip(), replays, backend, None)
        print(json.dumps([seconds, verdict]), flush=True)


def overhead(replays: int, backend: str, baseline: Baseline | None) -> dict:
    rows = []
    for n, c in enumerate(load_canaries({"honest"})):
        task = load_task(c.task_dir)
        # this verifier and the baseline's in alternation, each first every other canary
        before = baseline.full_s(c.name) if baseline and n % 2 else None
        full, verdict, isolation = timed_verification(c.name, replays, backend, None)
        before = baseline.full_s(c.name) if baseline and before is None else before
        inproc, inproc_verdict, _ = timed_verification(c.name, replays, backend, False)
        floor = floor_s(task, c.messages, backend)
        # in process, rules relaxed only for isolated tests are strict: some honest runs are rejected
        # at the audit, in milliseconds, which says nothing of the cost of verifying them
        inproc_ratio = round(inproc / floor, 1) if inproc_verdict == "accept" else "rejected"
        rows.append({"canary": c.name, "task": task.id, "verdict": verdict, "isolation": isolation,
                     "full_s": round(full, 2), "full_in_process_s": round(inproc, 2), "floor_s": round(floor, 2),
                     "ratio": round(full / floor, 1), "ratio_in_process": inproc_ratio,
                     **({"ratio_baseline": round(before / floor, 1)} if baseline else {})})  # fmt: skip
    by_task: dict[str, list[float]] = {}
    for r in rows:
        by_task.setdefault(r["task"], []).append(r["ratio"])
    return {
        "replays": replays,
        "median_ratio": statistics.median(r["ratio"] for r in rows),
        "median_ratio_baseline": statistics.median(r["ratio_baseline"] for r in rows) if baseline else None,
        "median_ratio_per_task": statistics.median(statistics.median(v) for v in by_task.values()),
        "tasks": len(by_task),
        "median_ratio_in_process": statistics.median(
            r["ratio_in_process"] for r in rows if r["ratio_in_process"] != "rejected"
        ),
        "rows": rows,
    }


def _median_run_s(run, reps: int) -> float:
    times = []
    for _ in range(reps):
        started = time.monotonic()
        result = run()
        times.append(time.monotonic() - started)
        assert result.status == "pass", result.evidence
    return statistics.median(times)


def isolation_cost(backend: str, reps: int) -> list[dict]:
    """Per canary task: its reference graded once in process and once isolated, medians."""
    rows = []
    for task_dir in sorted(d for d in TASKS.iterdir() if (d / "reference").is_dir()):
        task = load_task(task_dir)
        suite = HiddenSuite(task, task.required_tests)
        reference = {p.relative_to(task.reference_dir).as_posix(): p.read_bytes()
                     for p in task.reference_dir.rglob("*") if p.is_file()}  # fmt: skip
        args = (suite.test_files, suite.required, suite.prefixes)
        with tempfile.TemporaryDirectory() as tmp:
            tree = compose_tree(
                Path(tmp) / "in-process", task.workspace_dir, files=reference, tests=task.hidden_tests_dir
            )
            trees = compose_trees(task.workspace_dir, reference, [], task.hidden_tests_dir, Path(tmp) / "isolated",
                                  suite.own_protocol)  # fmt: skip
            inproc = _median_run_s(
                lambda: grading.run_tests(tree, *args, timeout=task.timeout_s, backend=backend), reps
            )
            isolated = _median_run_s(lambda: run_isolated(trees, *args, timeout=task.timeout_s, backend=backend), reps)
        rows.append({"task": task.id, "run_in_process_s": round(inproc, 2), "run_isolated_s": round(isolated, 2),
                     "run_ratio": round(isolated / inproc, 2)})  # fmt: skip
    return rows


def _revision(root: Path) -> str:
    return subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=root, capture_output=True, text=True
    ).stdout.strip()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--replays", type=int, default=3)
    parser.add_argument("--backend", default="bwrap")
    parser.add_argument("--reps", type=int, default=5, help="graded runs per task for the isolation cost")
    parser.add_argument("--baseline", type=Path, default=os.environ.get("TOUCHSTONE_BENCH_BASELINE") or None,
                        help="a checkout of another verifier to time side by side (`make bench`: "
                        "TOUCHSTONE_BENCH_BASELINE)")  # fmt: skip
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)  # the baseline's process
    args = parser.parse_args()
    if args.serve:
        return _serve(args.replays, args.backend)
    throughput_rows = [throughput(w, args.replays, args.backend) for w in args.workers]
    baseline = Baseline(args.baseline, args.replays, args.backend) if args.baseline else None
    cost = overhead(args.replays, args.backend, baseline)
    runs = isolation_cost(args.backend, args.reps)
    notes = [
        f"backend {args.backend}, k = {args.replays} test runs per verification; corpus = the canaries "
        "(hacks, most rejected by cheap checks before any test run, and honest trajectories verified in full)",
        f"overhead = wall time of one full verification (replay, {args.replays} test runs, the oracle's two "
        "candidate replays, the lockstep check (the reference's two observed isolated runs, cached per task); the task's call recording and the reference's replay, once shown deterministic, are "
        "cached per task: the throughput runs above fill the cache, as a round's first trajectory of a task does; "
        "audits) / one plain pytest run of the required tests in a bare sandbox. Test runs 2..k and the oracle run "
        f"at once, after run 1 passed. Median over canaries {cost['median_ratio']}x with the tests isolated, over "
        f"the {cost['tasks']} tasks (each task's median) {cost['median_ratio_per_task']}x (target: within 5x); "
        f"{cost['median_ratio_in_process']}x with them in process (runs accepted there)",
        *(
            [
                f"ratio_baseline: the verifier of {args.baseline.name} ({_revision(args.baseline)}), timed in "
                f"alternation with this one on the same canary and floor; median {cost['median_ratio_baseline']}x"
            ]
            if baseline
            else []
        ),
        "canary-toolbox (7 canaries): its test_run_with_timeout waits 3 s in a test-side callback that the "
        "candidate's 1 s alarm cannot cut short across the process boundary, so each isolated run takes 3 s "
        "against 1 s in process",
        f"isolation per graded run: median of {args.reps} runs of each canary task's reference, isolated (judge + "
        f"candidate sandboxes) / in process; median {round(statistics.median(r['run_ratio'] for r in runs), 2)}x",
    ]
    results = throughput_rows + cost["rows"] + runs
    print(json.dumps({"bench": "verify", "results": results, "notes": notes}, indent=2))


if __name__ == "__main__":
    main()
