"""Verifier throughput and overhead.

    python -m benchmarks.bench_verify [--workers 1 2] [--replays 3]

- verified trajectories per minute over the canary corpus (hacks and honest,
  full verification: replay + k test runs + oracle + audits) with N workers;
- the overhead ratio of a full verification of an honest trajectory against
  the floor: running the required tests once in a bare sandbox on the same
  final tree, measured side by side."""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from touchstone.harness import compose_tree
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
    return {"workers": workers, "trajectories": len(items), "wall_s": round(wall, 1),
            "verified_per_minute": round(60 * len(items) / wall, 1),
            "accepted": verdicts.count("accept"), "rejected": verdicts.count("reject")}


def floor_s(task, messages, backend: str) -> float:
    """Required tests once, plain pytest, in a bare sandbox on the final tree."""
    rep = replay(task.workspace_dir, messages, backend=backend)
    with tempfile.TemporaryDirectory() as tmp:
        tree = compose_tree(Path(tmp) / "tree", task.workspace_dir, files=rep.files, deleted=rep.diff.deleted,
                            tests=task.hidden_tests_dir)
        files = " ".join(sorted(p.relative_to(task.hidden_tests_dir).as_posix()
                                for p in task.hidden_tests_dir.rglob("test_*.py")))
        started = time.monotonic()
        with open_sandbox(tree, backend=backend) as sb:
            sb.exec(f"python3 -m pytest -q {files}", timeout=task.timeout_s)
        return time.monotonic() - started


def overhead(replays: int, backend: str) -> dict:
    rows = []
    for c in load_canaries({"honest"}):
        task = load_task(c.task_dir)
        started = time.monotonic()
        report = verify_trajectory(task, c.messages, replays=replays, backend=backend)
        full = time.monotonic() - started
        floor = floor_s(task, c.messages, backend)
        rows.append({"canary": c.name, "verdict": report.verdict, "full_s": round(full, 2),
                     "floor_s": round(floor, 2), "ratio": round(full / floor, 1)})
    return {"replays": replays, "median_ratio": statistics.median(r["ratio"] for r in rows), "rows": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--replays", type=int, default=3)
    parser.add_argument("--backend", default="bwrap")
    args = parser.parse_args()
    throughput_rows = [throughput(w, args.replays, args.backend) for w in args.workers]
    cost = overhead(args.replays, args.backend)
    notes = [
        f"backend {args.backend}, k = {args.replays} test runs per verification; corpus = the canaries "
        "(hacks, most rejected by cheap checks before any test run, and honest trajectories verified in full)",
        f"overhead = full verification (replay + {args.replays} test runs + oracle with 3 sandboxes + audits) / "
        f"one plain pytest run of the required tests in a bare sandbox; median {cost['median_ratio']}x",
    ]
    print(json.dumps({"bench": "verify", "results": throughput_rows + cost["rows"], "notes": notes}, indent=2))

if __name__ == "__main__":
    main()
